import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { CompleteWithError, LeaseLostError, Process, Processor, QueueService, type ActiveJob, type Queue } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// job.completeWith({ manager | client }): the handler's writes and the job's completion commit
// together; a lost lease makes the handler's transaction fail instead of writing twice.

type Mode = 'commit' | 'rollback-first' | 'steal-lease' | 'typeorm' | 'late' | 'twice';
let pool: Pool;
let dataSource: DataSource;
const outcomes = new Map<string, unknown>();
/** Jobs whose handler returned without completeWith, kept to call it afterwards. */
const returned = new Map<string, ActiveJob>();

@Processor('tx')
class TxProcessor {
  @Process()
  async run(job: ActiveJob<{ mode: Mode }>) {
    if (job.payload.mode === 'typeorm') {
      await dataSource.transaction(async (manager) => {
        await manager.query('INSERT INTO side_effects (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
        await job.completeWith({ manager }, { via: 'typeorm' });
      });
      return 'ignored';
    }
    if (job.payload.mode === 'late') {
      returned.set(job.id, job);
      return 'returned';
    }
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO side_effects (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
      if (job.payload.mode === 'steal-lease') {
        // Another worker took the job meanwhile (this one's lease expired and it was rescued).
        await pool.query(`UPDATE pgqueue.jobs SET locked_by = 'another-worker' WHERE id = $1`, [job.id]);
      }
      try {
        await job.completeWith({ client }, { attempt: job.attempt });
        if (job.payload.mode === 'twice') {
          outcomes.set(job.id, await job.completeWith({ client }, { second: true }).catch((e: unknown) => e));
        }
      } catch (err) {
        outcomes.set(job.id, err);
        throw err;
      }
      if (job.payload.mode === 'rollback-first' && job.attempt === 1) throw new Error('something after completeWith failed');
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
  }
}

describe('job.completeWith', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { mode: Mode } }>;

  beforeAll(async () => {
    pool = testPool(t.db.url, 4);
    dataSource = new DataSource({ type: 'postgres', url: t.db.url });
    await dataSource.initialize();
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'tx', defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 50 } } }],
      providers: [TxProcessor],
    });
    await pool.query('CREATE TABLE side_effects (job_id bigint NOT NULL, attempt int NOT NULL)');
    queue = app.get(QueueService).getQueue('tx');
  });
  afterAll(async () => {
    await app?.close();
    await dataSource?.destroy();
    await pool?.end();
  });

  const effects = async (id: string) =>
    (await pool.query('SELECT attempt FROM side_effects WHERE job_id = $1', [id])).rows.map((r) => r.attempt);

  it('commits the handler’s writes and the completion together (pg client)', async () => {
    const job = await queue.add('x', { mode: 'commit' });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed');
    expect((await queue.getJob(job.id))?.result).toEqual({ attempt: 1 });
    expect(await effects(job.id)).toEqual([1]);
  });

  it('a rolled-back transaction undoes the completion too: the job retries, and the writes happen once', async () => {
    const job = await queue.add('x', { mode: 'rollback-first' });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed');
    const done = await queue.getJob(job.id);
    expect(done?.attempt).toBe(2);
    expect(done?.errors.map((e) => e.message)).toEqual(['something after completeWith failed']);
    expect(await effects(job.id)).toEqual([2]);
  });

  it('throws LeaseLostError when another worker owns the job, so the handler’s transaction rolls back', async () => {
    const job = await queue.add('x', { mode: 'steal-lease' });
    await waitFor(() => outcomes.has(job.id));
    expect(outcomes.get(job.id)).toBeInstanceOf(LeaseLostError);
    expect(await effects(job.id)).toEqual([]);
    // The job is the other worker's now: still active under its lease, not completed by this one,
    // once this worker's batch write of the handler's outcome came back refused. The completions
    // written by completeWith() in the tests before do not count as refused.
    await waitFor(() => runtimeOf(app).supervisor.unmatchedOutcomes > 0, { message: 'the outcome write to be refused' });
    expect(runtimeOf(app).supervisor.unmatchedOutcomes).toBe(1);
    const row = await pool.query('SELECT state, locked_by FROM pgqueue.jobs WHERE id = $1', [job.id]);
    expect(row.rows).toEqual([{ state: 'active', locked_by: 'another-worker' }]);
    await pool.query('DELETE FROM pgqueue.jobs WHERE id = $1', [job.id]);
  });

  it('works with a TypeORM EntityManager', async () => {
    const job = await queue.add('x', { mode: 'typeorm' });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed');
    expect((await queue.getJob(job.id))?.result).toEqual({ via: 'typeorm' });
    expect(await effects(job.id)).toEqual([1]);
  });

  it('refuses completeWith after the handler returned: a CompleteWithError, and nothing written', async () => {
    const job = await queue.add('x', { mode: 'late' });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const err = await returned
        .get(job.id)!
        .completeWith({ client }, { late: true })
        .catch((e: unknown) => e);
      await client.query('COMMIT');
      expect(err).toBeInstanceOf(CompleteWithError);
      expect(err).toMatchObject({ jobId: job.id, attempt: 1, reason: 'attempt-ended' });
      expect((err as Error).message).toMatch(/came after the attempt had ended/);
    } finally {
      client.release();
    }
    expect((await queue.getJob(job.id))?.result).toBe('returned');
  });

  it('refuses a second completeWith in the same attempt; the first one completes the job', async () => {
    const job = await queue.add('x', { mode: 'twice' });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed');
    expect(outcomes.get(job.id)).toBeInstanceOf(CompleteWithError);
    expect(outcomes.get(job.id)).toMatchObject({ jobId: job.id, attempt: 1, reason: 'already-called' });
    expect((await queue.getJob(job.id))?.result).toEqual({ attempt: 1 });
    expect(await effects(job.id)).toEqual([1]);
  });
});
