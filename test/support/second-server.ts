import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

/** A second PostgreSQL server, started by test/fixtures/second-server.mjs in a child process. */
export interface SecondServer {
  /** URL of its `postgres` database. */
  readonly url: string;
  /** Stops the server (fast shutdown), keeping its data, until `up()`. */
  down(): Promise<void>;
  /** Starts it again, on the same port and data directory. */
  up(): Promise<void>;
  /** Stops it for good and removes its data directory. */
  stop(): Promise<void>;
}

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'second-server.mjs');

/**
 * Starts a throwaway embedded PostgreSQL next to the test server (whatever that one is): its own
 * port, its own data directory under os.tmpdir(), removed by `stop()`. As root, the fixture runs
 * it as the OS user postgres (scripts/pg-native.mjs).
 */
export async function startSecondServer(): Promise<SecondServer> {
  const child: ChildProcess = spawn(process.execPath, [FIXTURE], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: { key: string; resolve: () => void; reject: (e: Error) => void }[] = [];
  let url: string | undefined;
  let failed: Error | undefined;
  const ready = new Promise<string>((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return; // a stray line from the package
      }
      if (typeof msg.error === 'string') {
        failed = new Error(`second server: ${msg.error}`);
        reject(failed);
        for (const w of waiting.splice(0)) w.reject(failed);
        return;
      }
      if (typeof msg.url === 'string') {
        url = msg.url;
        resolve(url);
      }
      for (const key of ['down', 'up']) {
        if (!msg[key]) continue;
        const i = waiting.findIndex((w) => w.key === key);
        if (i >= 0) waiting.splice(i, 1)[0].resolve();
      }
    });
    child.once('exit', (code) => {
      const err = new Error(`second server process exited (code ${code})`);
      if (!url) reject(err);
      for (const w of waiting.splice(0)) w.reject(err);
    });
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const send = (cmd: 'down' | 'up'): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      if (failed) return reject(failed);
      waiting.push({ key: cmd, resolve, reject });
      child.stdin!.write(`${cmd}\n`);
    });
  try {
    await ready;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    url: url!,
    down: () => send('down'),
    up: () => send('up'),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.stdin!.end();
      await exited;
    },
  };
}
