import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { useTestDatabase, waitFor } from '../support/database';

// Issue 27, constraints: a crash in the middle of a batched operation leaves nothing half-done
// that a rerun does not finish. A process of the built package runs retryJobs, removeJobs or
// clean over 20,000 failed jobs (cancelJobs over 20,000 waiting ones) and is SIGKILLed after a few batches: each batch of 1,000 is
// committed whole or not at all (what moved is a multiple of 1,000), no job is lost or in both
// tables, and the same call made again finishes the rest.

const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'bulk-process.js');
const TOTAL = 20_000;
const BATCH = 1000;
const CHILD = 'bulk-crash-child';

describe('a batched operation killed in the middle', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    assertBuilt();
    app = await bootApp({ options: { connection: t.db.url }, queues: [{ name: 'bulk' }] });
    queue = app.get(QueueService).getQueue('bulk');
  });
  afterAll(async () => {
    await app?.close();
  });

  const count = async (sql: string) => (await t.pool.query<{ n: number }>(sql)).rows[0].n;
  const live = () => count(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'bulk'`);
  const failed = () => count(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'bulk' AND state = 'failed'`);
  const seed = async () => {
    await t.pool.query(`DELETE FROM pgqueue.jobs WHERE queue = 'bulk'`);
    await t.pool.query(`DELETE FROM pgqueue.job_history WHERE queue = 'bulk'`);
    await t.pool.query(
      `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                        created_at, finished_at)
       SELECT 1000000000 + g, 'bulk', 'x', pg_catalog.jsonb_build_object('n', g), 'failed', 0, now(), 1, 1, '[]', now(),
              now() - interval '1 hour'
       FROM generate_series(1, $1::int) g`,
      [TOTAL],
    );
  };

  /** Starts the process on `op`; SIGKILLs it once `progress()` says at least `batches` batches committed. */
  async function killMidway(op: string, progress: () => Promise<number>, batches = 3): Promise<void> {
    const proc = spawn(process.execPath, [FIXTURE], {
      cwd: ROOT,
      env: { ...process.env, DB_URL: `${t.db.url}${t.db.url.includes('?') ? '&' : '?'}application_name=${CHILD}`, BULK_OP: op },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = once(proc, 'exit');
    try {
      await waitFor(async () => (await progress()) >= batches * BATCH, {
        timeoutMs: 60_000,
        intervalMs: 5,
        message: () => `${op} to commit ${batches} batches; output: ${out}`,
      });
    } finally {
      proc.kill('SIGKILL');
    }
    const [code, signal] = (await exited) as [number | null, string | null];
    expect({ code, signal, out }).toEqual({ code: null, signal: 'SIGKILL', out: 'ready\n' });
    // The statement in flight when the process died still runs to its end on the server (and
    // commits: autocommit), which then finds the client gone and ends the session: wait for that.
    await waitFor(
      async () => (await count(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = '${CHILD}'`)) === 0,
      { message: `the killed process's sessions to end` },
    );
  }

  it('retryJobs: whole batches moved, none lost or doubled, a rerun moves the rest', async () => {
    await seed();
    await killMidway('retryJobs', live);
    const moved = await live();
    expect(moved % BATCH).toBe(0);
    expect(moved).toBeLessThan(TOTAL);
    expect(moved + (await failed())).toBe(TOTAL);
    expect(
      await count(`SELECT count(*)::int AS n FROM pgqueue.jobs j JOIN pgqueue.job_history h USING (id) WHERE j.queue = 'bulk'`),
    ).toBe(0);
    expect(await queue.retryJobs({ state: 'failed' })).toBe(TOTAL - moved);
    expect(await live()).toBe(TOTAL);
    expect(await count(`SELECT count(DISTINCT (payload->>'n'))::int AS n FROM pgqueue.jobs WHERE queue = 'bulk'`)).toBe(TOTAL);
  }, 120_000);

  it.each([
    ['removeJobs', () => queue.removeJobs({ state: 'failed' })],
    ['clean', () => queue.clean({ state: 'failed', olderThanMs: 0 })],
  ])(
    '%s: whole batches removed, a rerun removes the rest',
    async (op, rerun) => {
      await seed();
      await killMidway(op, async () => TOTAL - (await failed()));
      const left = await failed();
      expect((TOTAL - left) % BATCH).toBe(0);
      expect(left).toBeGreaterThan(0);
      expect(await rerun()).toBe(left);
      expect(await failed()).toBe(0);
    },
    120_000,
  );

  it('cancelJobs: whole batches cancelled (out of the live table and into history together), a rerun cancels the rest', async () => {
    await t.pool.query(`DELETE FROM pgqueue.jobs WHERE queue = 'bulk'`);
    await t.pool.query(`DELETE FROM pgqueue.job_history WHERE queue = 'bulk'`);
    await queue.addBulk([...Array(TOTAL)].map((_, n) => ({ name: 'x', payload: { n } })));
    const cancelled = () =>
      count(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'bulk' AND state = 'cancelled'`);
    await killMidway('cancelJobs', cancelled);
    const done = await cancelled();
    expect(done % BATCH).toBe(0);
    expect(done).toBeLessThan(TOTAL);
    expect(done + (await live())).toBe(TOTAL);
    expect(await queue.cancelJobs({ state: 'waiting' })).toBe(TOTAL - done);
    expect(await cancelled()).toBe(TOTAL);
    expect(await live()).toBe(0);
  }, 120_000);
});
