import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Client, type Pool } from 'pg';
import { clientExecutor } from '../../lib/db/executor';
import { applyMigration, latestVersion, loadMigrations, migrate } from '../../lib/db/migrator';
import { assertBuilt } from '../support/built';
import { createTestDatabase, testPool, waitFor, type TestDatabase } from '../support/database';

// The chaos suite's second bug: a backend killed between two statements of a client the queue
// had checked out of its pool (the maintenance transaction, the migration) raised an 'error'
// event nobody listened to, and the process crashed. Each test here makes such a statement
// wait on a lock the test holds, terminates that backend with pg_terminate_backend, and checks
// that the process (test/fixtures/reboot-process.js, the BUILT package) lives on and that the
// next maintenance pass, or the next boot, succeeds.

const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'reboot-process.js');

type Exit = { code: number | null; signal: NodeJS.Signals | null };

interface Child {
  readonly proc: ChildProcess;
  exit: Exit | null;
  readonly exited: Promise<Exit>;
  readonly output: () => string;
}

const children: Child[] = [];

function startChild(env: Record<string, string>): Child {
  const proc = spawn(process.execPath, [FIXTURE], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const child: Child = {
    proc,
    exit: null,
    exited: new Promise<Exit>((resolve) => proc.on('exit', (code, signal) => resolve((child.exit = { code, signal })))),
    output: () => out,
  };
  children.push(child);
  return child;
}

/** Waits for `pattern` in the child's output; throws at once, with the output, if the child exits. */
async function untilOutput(child: Child, pattern: RegExp, what: string, timeoutMs = 20_000): Promise<void> {
  await waitFor(() => child.exit !== null || pattern.test(child.output()), {
    timeoutMs,
    message: () => `${what}; output so far:\n${child.output()}`,
  });
  if (child.exit)
    throw new Error(`the process exited (${JSON.stringify(child.exit)}) before ${what}; output:\n${child.output()}`);
}

/** SIGTERM, then the exit code, which must be 0. */
async function stopChild(child: Child): Promise<void> {
  if (child.exit) throw new Error(`the process had already exited (${JSON.stringify(child.exit)}); output:\n${child.output()}`);
  child.proc.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([
    child.exited,
    new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`no exit after SIGTERM; output:\n${child.output()}`)), 15_000)),
    ),
  ]).finally(() => clearTimeout(timer));
  if (exit.code !== 0)
    throw new Error(`exited with ${JSON.stringify(exit)} after SIGTERM, expected code 0; output:\n${child.output()}`);
}

/**
 * The queue's backend that waits on a lock held by `holderPid`, once it does, with its query.
 * `pg_blocking_pids` names exactly the session the test blocked, whatever else runs.
 */
async function blockedQueueBackend(pool: Pool, holderPid: number, queryLike: string): Promise<{ pid: number; query: string }> {
  let found: { pid: number; query: string } | undefined;
  await waitFor(
    async () => {
      const { rows } = await pool.query<{ pid: number; query: string }>(
        `SELECT pid, query FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'nestjs-pg-queue'
           AND $1 = ANY(pg_blocking_pids(pid)) AND xact_start IS NOT NULL AND query LIKE $2`,
        [holderPid, queryLike],
      );
      found = rows[0];
      return found !== undefined;
    },
    { timeoutMs: 20_000, message: `a queue backend blocked by pid ${holderPid} in a statement like ${queryLike}` },
  );
  return found!;
}

async function terminate(pool: Pool, pid: number): Promise<void> {
  const { rows } = await pool.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
  expect(rows[0].ok).toBe(true);
  await waitFor(async () => (await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0, {
    message: `backend ${pid} to be gone`,
  });
}

describe('a queue backend terminated in the middle of a transaction', () => {
  let db: TestDatabase;
  let pool: Pool;
  let locker: Client;

  beforeAll(async () => {
    assertBuilt();
    db = await createTestDatabase();
    pool = testPool(db.url, 3);
  });
  beforeEach(async () => {
    locker = new Client({ connectionString: db.url, application_name: 'test-locker' });
    await locker.connect();
  });
  afterEach(async () => {
    await locker.end().catch(() => undefined);
    for (const c of children.splice(0)) if (!c.exit) c.proc.kill('SIGKILL');
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('in the maintenance pass: the process lives on, and the next pass does the work', async () => {
    await migrate(pool, 'pgqueue');
    // A completed job a year past its retention: the pass's prune statement will delete it.
    await pool.query(
      `INSERT INTO pgqueue.job_history
         (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
       VALUES (424242, 'work', 'job', '{}', 'completed', 0, now(), 1, 3, '[]', now(), now() - interval '1 year')`,
    );
    await locker.query('BEGIN');
    await locker.query('SELECT id FROM pgqueue.job_history WHERE id = 424242 FOR UPDATE');
    const lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;

    const child = startChild({ DB_URL: db.url, PGQ_RESCUE_MS: '200' });
    await untilOutput(child, /^ready$/m, 'the process to boot');
    // The pass has begun, taken the election lock and rescued; its prune waits for our row lock.
    const blocked = await blockedQueueBackend(pool, lockerPid, '%DELETE FROM%job_history%');
    await terminate(pool, blocked.pid);
    // The pass reports the lost connection, and the process carries on.
    await untilOutput(child, /terminating connection due to administrator command/, 'the failed pass to be logged');
    await locker.query('ROLLBACK');

    const pruned = async () => (await pool.query('SELECT 1 FROM pgqueue.job_history WHERE id = 424242')).rowCount === 0;
    await waitFor(async () => child.exit !== null || (await pruned()), {
      timeoutMs: 20_000,
      message: () => `a later pass to prune the row; output:\n${child.output()}`,
    });
    await stopChild(child);
  });

  it('in a migration: the boot fails with a PgQueueError, the process lives on, and the next boot migrates', async () => {
    const schema = 'kill_mid_migration';
    // The schema at version 4; step 5 begins with ALTER TABLE queues, which our lock holds up.
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      for (const m of loadMigrations().filter((x) => x.version < 5)) await applyMigration(clientExecutor(c), schema, m);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${schema}.queues IN ACCESS SHARE MODE`);
    const lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;

    const child = startChild({ DB_URL: db.url, PGQ_SCHEMA: schema });
    const blocked = await blockedQueueBackend(pool, lockerPid, '%ALTER TABLE queues%');
    await terminate(pool, blocked.pid);
    await untilOutput(child, /^boot-failed /m, 'the boot to fail');
    expect(child.output()).toMatch(/^boot-failed PgQueueError: Migrating schema "kill_mid_migration" failed: /m);
    await locker.query('COMMIT');
    // Nothing of the interrupted migration stayed.
    const version = async () =>
      (await pool.query<{ v: number }>(`SELECT max(version)::int AS v FROM ${schema}.migrations`)).rows[0].v;
    expect(await version()).toBe(4);

    child.proc.stdin!.write('boot\n');
    await untilOutput(child, /^ready$/m, 'the second boot to succeed');
    expect(await version()).toBe(latestVersion());
    await stopChild(child);
  });
});
