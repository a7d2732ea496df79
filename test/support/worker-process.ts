import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { waitFor } from './database';

/** The repository root: child fixtures run from it, on the built package. */
export const ROOT = path.resolve(__dirname, '..', '..');

/** How a worker process ended. */
export type Exit = { code: number | null; signal: NodeJS.Signals | null };

/** A worker process started from a test fixture (test/fixtures/*-process.js). */
export interface WorkerProcess {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly pid: number;
  /** How it ended, once it has (null while it runs). */
  exit: Exit | null;
  readonly exited: Promise<Exit>;
  /** Its stdout and stderr so far, interleaved. */
  readonly output: () => string;
}

/**
 * Starts `fixture` as worker `name` with the test's environment plus `env`, records it in
 * `started` (for the file's afterAll: killAll), and collects what it prints.
 */
export function startWorkerProcess(
  started: WorkerProcess[],
  fixture: string,
  name: string,
  env: Record<string, string | number>,
): WorkerProcess {
  const all: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(env)) all[k] = String(v);
  const proc = spawn(process.execPath, [fixture], { cwd: ROOT, env: all, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const w: WorkerProcess = {
    name,
    proc,
    pid: proc.pid!,
    exit: null,
    exited: new Promise<Exit>((resolve) =>
      proc.on('exit', (code, signal) => {
        w.exit = { code, signal };
        resolve(w.exit);
      }),
    ),
    output: () => out,
  };
  started.push(w);
  return w;
}

/** Resolves once `w` printed its "ready" line; fails at once if it exits first. */
export async function untilReady(w: WorkerProcess): Promise<void> {
  await waitFor(
    () => {
      if (w.exit) throw new Error(`${w.name} exited during boot: ${JSON.stringify(w.exit)}\n${w.output()}`);
      return /^ready$/m.test(w.output());
    },
    { timeoutMs: 20_000, intervalMs: 20, message: () => `${w.name} to print "ready"; output:\n${w.output()}` },
  );
}

/** SIGKILLs every worker of `started` still running and waits for their exits (afterAll). */
export async function killAll(started: WorkerProcess[]): Promise<void> {
  const alive = started.splice(0).filter((w) => !w.exit);
  for (const w of alive) w.proc.kill('SIGKILL');
  await Promise.all(alive.map((w) => w.exited));
}
