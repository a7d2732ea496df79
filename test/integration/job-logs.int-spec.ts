import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import { PgQueueConfigError, PgQueuePayloadError, Process, Processor, QueueService, type ActiveJob } from '../../lib';
import { resolveModuleOptions } from '../../lib/core/options/module-checks';
import { HistoryPartitions } from '../../lib/db/history/partitions';
import { JobStore } from '../../lib/db/job-store';
import { migrate } from '../../lib/db/migrator';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// job.log(line): buffered by the worker, written in batches (counted here by a statement-level
// trigger on UPDATE OF logs, not by timing), kept across retries and a rescue, carried into
// history, capped (first lines kept, the rest counted), paged by getJobLogs, and dropped with
// the history partition that holds the job.

interface Work {
  mode: 'loop' | 'gate' | 'retry' | 'crash' | 'caps' | 'bad';
  n?: number;
}

const gates = new Map<string, () => void>();
const badCalls = new Map<string, string>();
let stealLease: ((id: string) => Promise<void>) | null = null;

@Processor('logs')
class LogsProcessor {
  @Process('work')
  async work(job: ActiveJob<Work>) {
    const p = job.payload;
    if (p.mode === 'loop') {
      for (let i = 1; i <= (p.n ?? 500); i++) job.log(`line ${i}`);
      return 'looped';
    }
    if (p.mode === 'gate') {
      job.log('before the gate');
      await new Promise<void>((resolve) => gates.set(job.id, resolve));
      job.log('after the gate');
      return 'gated';
    }
    if (p.mode === 'retry') {
      job.log(`attempt ${job.attempt} starts`);
      if (job.attempt === 1) throw new Error('first attempt fails after logging');
      return 'retried';
    }
    if (p.mode === 'crash') {
      if (job.attempt === 1) {
        job.log('written before the crash');
        // The node "dies": its lease is taken away and expires; the rescuer hands the job on.
        await stealLease!(job.id);
        job.log('logged by a node that lost its lease');
        return 'ghost';
      }
      job.log(`attempt ${job.attempt} after the rescue`);
      return 'rescued';
    }
    if (p.mode === 'caps') {
      job.log('é'.repeat(100)); // 200 bytes: cut to maxLineBytes (64)
      for (let i = 1; i <= 40; i++) job.log(`cap ${i}`);
      return 'capped';
    }
    try {
      job.log(42 as unknown as string);
      badCalls.set(job.id, 'accepted');
    } catch (err) {
      badCalls.set(job.id, `${err instanceof PgQueuePayloadError}: ${(err as Error).message}`);
    }
    return 'bad';
  }
}

describe('job.log() and getJobLogs()', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  const statements = async (): Promise<number> =>
    (await t.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM log_statements')).rows[0].n;
  const finished = (id: string, state = 'completed') =>
    waitFor(async () => (await queues.getJob(id))?.state === state, { message: `job ${id} to be ${state}`, timeoutMs: 20_000 });
  const add = async (w: Work) => (await queues.add('logs', 'work', w)).id;

  beforeAll(async () => {
    app = await bootApp({
      options: {
        connection: t.db.url,
        schema: 'pgqueue',
        progressIntervalMs: 200,
        pollIntervalMs: 200,
        rescueIntervalMs: 200,
        jobLogs: { maxLines: 30, maxLineBytes: 64, maxBytes: 4096 },
      },
      queues: [{ name: 'logs', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10 } } }, { name: 'other' }],
      providers: [LogsProcessor],
    });
    // Each statement that writes jobs.logs (UPDATE OF logs) is counted once, whatever its rows.
    await t.pool.query(`
      CREATE TABLE log_statements (at timestamptz DEFAULT clock_timestamp());
      CREATE FUNCTION count_log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO log_statements DEFAULT VALUES; RETURN NULL; END $$;
      CREATE TRIGGER log_statement AFTER UPDATE OF logs ON pgqueue.jobs
        FOR EACH STATEMENT EXECUTE FUNCTION count_log_statement();`);
    stealLease = async (id) => {
      await waitFor(
        async () => (await t.pool.query(`SELECT 1 FROM pgqueue.jobs WHERE id = $1 AND logs IS NOT NULL`, [id])).rowCount === 1,
        { message: 'the line logged before the crash to be written' },
      );
      await t.pool.query(
        `UPDATE pgqueue.jobs SET locked_by = 'a-node-that-died', locked_until = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
    };
    await app.init();
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    for (const open of gates.values()) open();
    await app?.close();
  });

  it('a loop of lines costs one write, not one per line, and the completed job keeps them in history, paged', async () => {
    const before = await statements();
    const id = await add({ mode: 'loop', n: 25 });
    await finished(id);
    // The lines were written by one statement (the attempt's end), before the outcome.
    expect((await statements()) - before).toBe(1);
    const all = await queues.getJobLogs('logs', id);
    expect(all).toEqual({ logs: Array.from({ length: 25 }, (_, i) => `line ${i + 1}`), count: 25, dropped: 0 });
    const { rows } = await t.pool.query(`SELECT logs -> 'lines' AS lines FROM pgqueue.job_history WHERE id = $1`, [id]);
    expect(rows[0].lines).toHaveLength(25);
    expect(await queues.getJobLogs('logs', id, { offset: 10, limit: 5 })).toEqual({
      logs: ['line 11', 'line 12', 'line 13', 'line 14', 'line 15'],
      count: 25,
      dropped: 0,
    });
    expect((await queues.getJobLogs('logs', id, { offset: 24, limit: 100 })).logs).toEqual(['line 25']);
    expect((await queues.getJobLogs('logs', id, { offset: 25 })).logs).toEqual([]);
    // Another queue's job, an unknown id, a malformed one: an empty log, as BullMQ answers.
    expect(await queues.getJobLogs('other', id)).toEqual({ logs: [], count: 0, dropped: 0 });
    expect(await queues.getJobLogs('logs', '999999999')).toEqual({ logs: [], count: 0, dropped: 0 });
    expect(await queues.getJobLogs('logs', 'nope')).toEqual({ logs: [], count: 0, dropped: 0 });

    // 500 lines over the cap of 30: the first 30 kept, 470 counted, still one statement.
    const before2 = await statements();
    const big = await add({ mode: 'loop', n: 500 });
    await finished(big);
    expect((await statements()) - before2).toBe(1);
    const capped = await queues.getJobLogs('logs', big, { limit: 1000 });
    expect(capped.count).toBe(30);
    expect(capped.dropped).toBe(470);
    expect(capped.logs[29]).toBe('line 30');
  });

  it('lines of a running job show within the flush interval, and those logged later join them', async () => {
    const id = await add({ mode: 'gate' });
    await waitFor(async () => (await queues.getJobLogs('logs', id)).count === 1, {
      message: 'the first line to be written',
      timeoutMs: 20_000,
    });
    expect((await queues.getJob(id))?.state).toBe('active');
    expect((await queues.getJobLogs('logs', id)).logs).toEqual(['before the gate']);
    await waitFor(async () => gates.has(id));
    gates.get(id)!();
    await finished(id);
    expect((await queues.getJobLogs('logs', id)).logs).toEqual(['before the gate', 'after the gate']);
  });

  it('a retry keeps the lines of the failed attempt and adds its own', async () => {
    const id = await add({ mode: 'retry' });
    await finished(id);
    expect((await queues.getJobLogs('logs', id)).logs).toEqual(['attempt 1 starts', 'attempt 2 starts']);
  });

  it('a rescue after a crash keeps the lines written before it; the dead node writes nothing more', async () => {
    const id = await add({ mode: 'crash' });
    await finished(id);
    const job = await queues.getJob(id);
    expect(job?.attempt).toBe(2);
    expect((await queues.getJobLogs('logs', id)).logs).toEqual(['written before the crash', 'attempt 2 after the rescue']);
  });

  it('caps: a long line is cut to maxLineBytes on a character boundary; the first lines are kept, the rest counted', async () => {
    const id = await add({ mode: 'caps' });
    await finished(id);
    const page = await queues.getJobLogs('logs', id);
    expect(Buffer.byteLength(page.logs[0])).toBeLessThanOrEqual(64);
    expect(page.logs[0]).toBe(`${'é'.repeat(30)}…`);
    expect(page.count).toBe(30);
    expect(page.logs[29]).toBe('cap 29');
    expect(page.dropped).toBe(11);
  });

  it('refuses a line that is not a string, bad getJobLogs options and bad jobLogs options, saying what to use', async () => {
    const id = await add({ mode: 'bad' });
    await finished(id);
    expect(badCalls.get(id)).toMatch(/^true: log\(\) of job \d+ \("logs\/work"\): 42 is not a string/);
    await expect(queues.getJobLogs('logs', id, { limit: 0 })).rejects.toThrow(/limit: 0 \(it is below 1\)/);
    await expect(queues.getJobLogs('logs', id, { start: 0 } as never)).rejects.toThrow(/"start" \(use offset/);
    await expect(queues.getJobLogs('logs', id, 'all' as never)).rejects.toThrow(PgQueueConfigError);
    expect(() => resolveModuleOptions({ jobLogs: { maxLines: 0 } })).toThrow(/Invalid jobLogs.maxLines: 0/);
    expect(() => resolveModuleOptions({ jobLogs: { maxLine: 10 } as never })).toThrow(/Unknown option\(s\) in jobLogs/);
    expect(() => resolveModuleOptions({ jobLogs: 5 as never })).toThrow(/Use \{ maxLines\?, maxLineBytes\?, maxBytes\? \}/);
    expect(() => resolveModuleOptions({ jobLogs: { maxLineBytes: 8192, maxBytes: 4096 } })).toThrow(/above maxBytes/);
    expect(resolveModuleOptions({}).jobLogs).toEqual({ maxLines: 1000, maxLineBytes: 4096, maxBytes: 262_144 });
  });
});

describe('job logs in a partitioned history', () => {
  const t = useTestDatabase();
  const D = 86_400_000;

  async function finishedWithLogs(pool: Pool, id: number, state: string, at: Date, lines: string[]): Promise<string> {
    await pool.query(
      `INSERT INTO prune.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at, logs)
       VALUES ($1, 'q', 'x', '{}', $2, 0, $3, 1, 1, '[]', $3, $3, $4)`,
      [id, state, at, JSON.stringify({ lines, bytes: 0, dropped: 0 })],
    );
    return String(id);
  }

  it('go with the partition that holds their job; a failed job of that day keeps its logs', async () => {
    await migrate(t.pool, 'prune');
    const store = new JobStore(t.pool, {
      schema: 'prune',
      retention: { completedMs: D, cancelledMs: D, failedMs: null },
      asyncCommit: false,
      preparedStatements: false,
    });
    const parts = new HistoryPartitions(t.pool, 'prune', D);
    const now = (await t.pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n as number;
    expect((await parts.runOnce(D, now - 5 * D)).created).toHaveLength(3);
    const old = await finishedWithLogs(t.pool, 10, 'completed', new Date(now - 5 * D), ['old one']);
    const failed = await finishedWithLogs(t.pool, 11, 'failed', new Date(now - 5 * D), ['failed one']);
    const recent = await finishedWithLogs(t.pool, 12, 'completed', new Date(now - 60_000), ['recent one']);
    expect((await store.logs.page('q', old, 0, 10))?.logs).toEqual(['old one']);

    expect((await parts.runOnce(D, now)).dropped.length).toBeGreaterThan(0);
    expect(await store.logs.page('q', old, 0, 10)).toBeNull();
    expect((await t.pool.query(`SELECT 1 FROM prune.job_history WHERE logs -> 'lines' ? 'old one'`)).rowCount).toBe(0);
    expect((await store.logs.page('q', failed, 0, 10))?.logs).toEqual(['failed one']);
    expect((await store.logs.page('q', recent, 0, 10))?.logs).toEqual(['recent one']);
  });

  it('move with their job in the batched calls of the operator: retryJobs back to waiting, cancelJobs to history with its unique key', async () => {
    await migrate(t.pool, 'moves');
    const store = new JobStore(t.pool, {
      schema: 'moves',
      retention: { completedMs: D, cancelledMs: D, failedMs: null },
      asyncCommit: false,
      preparedStatements: false,
    });
    const log = (lines: string[]) => JSON.stringify({ lines, bytes: 0, dropped: 0 });
    await t.pool.query(
      `INSERT INTO moves.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at, logs)
       VALUES (20, 'q', 'x', '{}', 'failed', 0, now(), 1, 1, '[]', now(), now(), $1)`,
      [log(['failed, then retried'])],
    );
    expect(await store.bulk.retryFinished('q', { state: 'failed', name: null, finishedBefore: null })).toBe(1);
    expect((await t.pool.query(`SELECT state FROM moves.jobs WHERE id = 20`)).rows[0].state).toBe('waiting');
    expect((await store.logs.page('q', '20', 0, 10))?.logs).toEqual(['failed, then retried']);

    await t.pool.query(
      `INSERT INTO moves.jobs (id, queue, name, payload, run_at, logs, unique_key) OVERRIDING SYSTEM VALUE VALUES (21, 'q', 'x', '{}', now(), $1, 'k21')`,
      [log(['waiting, then cancelled'])],
    );
    expect(await store.bulk.cancelMatching('q', ['waiting'], null)).toBe(2);
    // The unique key goes to history with the job too (migration 0013), not kept by the retry.
    expect(
      (await t.pool.query(`SELECT id, unique_key FROM moves.job_history WHERE state = 'cancelled' ORDER BY id`)).rows,
    ).toEqual([
      { id: '20', unique_key: null },
      { id: '21', unique_key: 'k21' },
    ]);
    expect((await store.logs.page('q', '20', 0, 10))?.logs).toEqual(['failed, then retried']);
    expect((await store.logs.page('q', '21', 0, 10))?.logs).toEqual(['waiting, then cancelled']);
  });
});
