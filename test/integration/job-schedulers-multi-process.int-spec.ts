import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Client } from 'pg';
import { assertBuilt } from '../support/built';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

// Issue 28's "done when": a producer-only process (workers: false) adds a per-tenant scheduler
// at runtime, and three worker processes (test/fixtures/scheduler-process.js, the BUILT
// package) then run it once per tick between them: no tick twice, none skipped.

const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'scheduler-process.js');

interface Proc {
  readonly name: string;
  readonly proc: ChildProcess;
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  readonly exited: Promise<void>;
  readonly output: () => string;
}

const started: Proc[] = [];

function start(name: string, role: 'worker' | 'producer', dbUrl: string): Proc {
  const env: NodeJS.ProcessEnv = { ...process.env, DB_URL: dbUrl, ROLE: role, PGQ_POLL_MS: '200' };
  const proc = spawn(process.execPath, [FIXTURE], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const p: Proc = {
    name,
    proc,
    exit: null,
    exited: new Promise<void>((resolve) =>
      proc.on('exit', (code, signal) => {
        p.exit = { code, signal };
        resolve();
      }),
    ),
    output: () => out,
  };
  started.push(p);
  return p;
}

async function untilPrinted(p: Proc, line: string): Promise<void> {
  await waitFor(
    () => {
      if (new RegExp(`^${line}$`, 'm').test(p.output())) return true;
      if (p.exit) throw new Error(`${p.name} exited before printing "${line}": ${JSON.stringify(p.exit)}\n${p.output()}`);
      return false;
    },
    { timeoutMs: 20_000, intervalMs: 20, message: () => `${p.name} to print "${line}"; output:\n${p.output()}` },
  );
}

describe('a job scheduler added at runtime in a producer-only process', () => {
  let db: TestDatabase | undefined;
  let sql: Client | undefined;

  beforeAll(() => assertBuilt());

  afterEach(async () => {
    const alive = started.splice(0).filter((p) => !p.exit);
    for (const p of alive) p.proc.kill('SIGKILL');
    await Promise.all(alive.map((p) => p.exited));
    await sql?.end().catch(() => undefined);
    await db?.drop();
    db = sql = undefined;
  });

  it('ticks once per tick across three worker processes', async () => {
    db = await createTestDatabase();
    sql = new Client({ connectionString: db.url });
    await sql.connect();
    await sql.query('CREATE TABLE runs (job_id bigint NOT NULL, run_at timestamptz NOT NULL, pid int NOT NULL)');
    // One boots first and migrates; the others then start together.
    const workers = [start('worker-1', 'worker', db.url)];
    await untilPrinted(workers[0], 'ready');
    workers.push(start('worker-2', 'worker', db.url), start('worker-3', 'worker', db.url));
    await Promise.all(workers.map((w) => untilPrinted(w, 'ready')));

    const producer = start('producer', 'producer', db.url);
    await untilPrinted(producer, 'upserted');
    await producer.exited;
    expect(producer.exit).toEqual({ code: 0, signal: null });

    const runs = async () =>
      (await sql!.query<{ job_id: string; run_at: Date; pid: number }>('SELECT job_id, run_at, pid FROM runs ORDER BY run_at'))
        .rows;
    await waitFor(async () => (await runs()).length >= 8, {
      timeoutMs: 20_000,
      message: () => `eight ticks run; output:\n${started.map((p) => `${p.name}: ${p.output().slice(-1500)}`).join('\n')}`,
    });
    for (const w of workers) w.proc.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));

    const ran = await runs();
    const ticks = ran.map((r) => r.run_at.getTime());
    expect(new Set(ran.map((r) => r.job_id)).size).toBe(ran.length); // each job ran once
    expect(new Set(ticks).size).toBe(ticks.length); // no tick twice
    for (let i = 1; i < ticks.length; i++) expect(ticks[i] - ticks[i - 1]).toBe(1000); // none skipped
    // Every job any node inserted, run or not yet: one per tick.
    const inserted = (
      await sql.query<{ n: number; d: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT run_at)::int AS d FROM (
           SELECT run_at FROM pgqueue.jobs WHERE name = 'report' UNION ALL SELECT run_at FROM pgqueue.job_history WHERE name = 'report') j`,
      )
    ).rows[0];
    expect(inserted.n).toBe(inserted.d);
    const s = (await sql.query(`SELECT count FROM pgqueue.job_schedulers WHERE id = 'report:tenant-42'`)).rows[0];
    expect(s.count).toBe(inserted.n);
    // No node logged an error (a failed pass, a tick's insert refused).
    for (const w of workers) expect(w.output()).not.toMatch(/ERROR/);
  }, 90_000);
});
