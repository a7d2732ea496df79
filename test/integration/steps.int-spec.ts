import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import {
  LeaseLostError,
  Process,
  Processor,
  QueueService,
  StepError,
  WaitTimeoutError,
  type ActiveJob,
  type Queue,
} from '../../lib';
import { bootApp } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// Durable steps (issue 31): job.step() runs once per job and returns its recorded result on
// later attempts; { transaction: true } commits the step's writes with its record; job.sleep()
// and job.waitFor() park the job without a worker and without using an attempt.

type Mode = 'retry' | 'tx' | 'tx-throws' | 'steal' | 'twice' | 'sleep' | 'wait' | 'wait-timeout' | 'reorder';
type Payload = { mode: Mode; timeoutMs?: number };
let pool: Pool;
/** How many times each (job, step) function ran. */
const runs = new Map<string, number>();
const seen = new Map<string, unknown>();
const ran = (job: ActiveJob, step: string) => runs.set(`${job.id}:${step}`, (runs.get(`${job.id}:${step}`) ?? 0) + 1);
const count = (id: string, step: string) => runs.get(`${id}:${step}`) ?? 0;

@Processor('steps')
class StepsProcessor {
  @Process()
  async run(job: ActiveJob<Payload>) {
    const { mode } = job.payload;
    if (mode === 'retry') {
      const a = await job.step('a', () => (ran(job, 'a'), { at: new Date(0), attempt: job.attempt }));
      const b = await job.step('b', ({ idempotencyKey }) => (ran(job, 'b'), idempotencyKey));
      if (job.attempt === 1) throw new Error('fails after b');
      const c = await job.step('c', () => (ran(job, 'c'), undefined));
      return { a, b, c: c ?? null };
    }
    if (mode === 'tx' || mode === 'tx-throws' || mode === 'steal') {
      const n = await job
        .step(
          'reserve',
          async ({ client }) => {
            ran(job, 'reserve');
            await client.query('INSERT INTO side_effects (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
            if (mode === 'tx-throws' && job.attempt === 1) throw new Error('the step fails after its write');
            if (mode === 'steal')
              await pool.query(`UPDATE pgqueue.jobs SET locked_by = 'another-worker' WHERE id = $1`, [job.id]);
            return job.attempt;
          },
          { transaction: true },
        )
        .catch((err: unknown) => {
          seen.set(job.id, err);
          throw err;
        });
      if (mode === 'tx' && job.attempt === 1) throw new Error('fails after the step');
      return { reservedBy: n };
    }
    if (mode === 'twice') {
      await job.step('x', () => 1);
      await job
        .step('x', () => 2)
        .catch((err: unknown) => {
          seen.set(job.id, err);
          throw err;
        });
    }
    if (mode === 'sleep') {
      const before = await job.step('before', () => (ran(job, 'before'), 'b'));
      await job.sleep('nap', 300);
      const after = await job.step('after', () => (ran(job, 'after'), 'a'));
      return { before, after, attempt: job.attempt };
    }
    if (mode === 'wait' || mode === 'wait-timeout') {
      await job.step('before', () => void ran(job, 'before'));
      try {
        const approval = await job.waitFor<{ by: string }>('approved', { timeoutMs: job.payload.timeoutMs });
        return { approval, attempt: job.attempt };
      } catch (err) {
        if (err instanceof WaitTimeoutError) return { timedOut: err.step };
        throw err;
      }
    }
    if (mode === 'reorder') {
      // Attempt 1 records 'one' then 'two'; attempt 2 calls them the other way round.
      const names = job.attempt === 1 ? ['one', 'two'] : ['two', 'one'];
      const out: unknown[] = [];
      for (const name of names) out.push(await job.step(name, () => (ran(job, name), `${name}@${job.attempt}`)));
      if (job.attempt === 1) throw new Error('again');
      return out;
    }
    return null;
  }
}

describe('durable steps', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: Payload }>;

  beforeAll(async () => {
    pool = testPool(t.db.url, 4);
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'steps', concurrency: 4, defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 50 } } }],
      providers: [StepsProcessor],
    });
    await pool.query('CREATE TABLE side_effects (job_id bigint NOT NULL, attempt int NOT NULL)');
    queue = app.get(QueueService).getQueue('steps');
  });
  afterAll(async () => {
    await app?.close();
    await pool?.end();
  });

  const effects = async (id: string) =>
    (await pool.query('SELECT attempt FROM side_effects WHERE job_id = $1 ORDER BY attempt', [id])).rows.map((r) => r.attempt);
  const finished = (id: string) => async () => ['completed', 'failed'].includes((await queue.getJob(id))?.state ?? '');

  it('runs each step once: a retry returns the recorded results, as JSON, and runs only the steps not recorded', async () => {
    const job = await queue.add('x', { mode: 'retry' });
    await waitFor(finished(job.id));
    const done = await queue.getJob(job.id);
    expect(done?.state).toBe('completed');
    expect(done?.attempt).toBe(2);
    // The Date came back as JSON carries it, on the first run as on the replay.
    expect(done?.result).toEqual({ a: { at: '1970-01-01T00:00:00.000Z', attempt: 1 }, b: `${job.id}:b`, c: null });
    expect([count(job.id, 'a'), count(job.id, 'b'), count(job.id, 'c')]).toEqual([1, 1, 1]);
    // Readable after the job finished, in the order the handler reached them.
    const steps = await queue.getJobSteps(job.id);
    expect(steps.map((s) => [s.name, s.kind, s.status, s.attempt])).toEqual([
      ['a', 'step', 'done', 1],
      ['b', 'step', 'done', 1],
      ['c', 'step', 'done', 2],
    ]);
    expect(steps[0].result).toEqual({ at: '1970-01-01T00:00:00.000Z', attempt: 1 });
  });

  it('commits a transactional step’s writes with its record: a later failure of the job does not run it again', async () => {
    const job = await queue.add('x', { mode: 'tx' });
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ reservedBy: 1 });
    expect(count(job.id, 'reserve')).toBe(1);
    expect(await effects(job.id)).toEqual([1]);
  });

  it('rolls a transactional step’s writes back when it throws; the next attempt runs it again, and its write commits once', async () => {
    const job = await queue.add('x', { mode: 'tx-throws' });
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ reservedBy: 2 });
    expect(count(job.id, 'reserve')).toBe(2);
    expect(await effects(job.id)).toEqual([2]);
  });

  it('refuses to record a transactional step once another worker owns the job: LeaseLostError, its writes rolled back', async () => {
    const job = await queue.add('x', { mode: 'steal' });
    await waitFor(() => seen.has(job.id));
    expect(seen.get(job.id)).toBeInstanceOf(LeaseLostError);
    expect(await effects(job.id)).toEqual([]);
    expect(await queue.getJobSteps(job.id)).toEqual([]);
    await pool.query('DELETE FROM pgqueue.jobs WHERE id = $1', [job.id]);
  });

  it('refuses a step name used twice in one run (StepError)', async () => {
    const job = await queue.add('x', { mode: 'twice' });
    await waitFor(() => seen.has(job.id));
    expect(seen.get(job.id)).toBeInstanceOf(StepError);
    expect((seen.get(job.id) as Error).message).toMatch(/used twice in one run/);
  });

  it('sleeps without a worker and without using an attempt, then resumes after the sleep, skipping the steps before', async () => {
    const job = await queue.add('x', { mode: 'sleep' });
    // Parked: back in the queue (delayed), no worker's lease on it.
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'delayed');
    const parked = await pool.query('SELECT locked_by, attempt FROM pgqueue.jobs WHERE id = $1', [job.id]);
    expect(parked.rows).toEqual([{ locked_by: null, attempt: 0 }]);
    expect((await queue.getJobSteps(job.id)).map((s) => [s.name, s.status])).toEqual([
      ['before', 'done'],
      ['nap', 'sleeping'],
    ]);
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ before: 'b', after: 'a', attempt: 1 });
    expect([count(job.id, 'before'), count(job.id, 'after')]).toEqual([1, 1]);
    expect((await queue.getJobSteps(job.id)).map((s) => [s.name, s.status])).toEqual([
      ['before', 'done'],
      ['nap', 'done'],
      ['after', 'done'],
    ]);
  });

  it('parks on waitFor until queue.signal(), whose payload is the result; the first signal wins', async () => {
    const job = await queue.add('x', { mode: 'wait' });
    await waitFor(async () => (await queue.getJobSteps(job.id)).some((s) => s.name === 'approved' && s.status === 'waiting'));
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'delayed');
    expect(await queue.signal(job.id, 'approved', { by: 'ann' })).toBe(true);
    expect(await queue.signal(job.id, 'approved', { by: 'bob' })).toBe(false);
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ approval: { by: 'ann' }, attempt: 1 });
    expect(count(job.id, 'before')).toBe(1);
    // The job is finished: a signal now is refused.
    expect(await queue.signal(job.id, 'approved', { by: 'carl' })).toBe(false);
  });

  it('keeps a signal sent before the job waits: waitFor returns it without parking', async () => {
    const job = await queue.add('x', { mode: 'wait' }, { delayMs: 3_600_000 });
    expect(await queue.signal(job.id, 'approved', { by: 'early' })).toBe(true);
    await queue.promote(job.id);
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ approval: { by: 'early' }, attempt: 1 });
  });

  it('signals in the caller’s transaction: a rollback delivers nothing', async () => {
    const job = await queue.add('x', { mode: 'wait' });
    await waitFor(async () => (await queue.getJobSteps(job.id)).some((s) => s.status === 'waiting'));
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      expect(await queue.signal(job.id, 'approved', { by: 'rolled-back' }, { client })).toBe(true);
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      expect(await queue.signal(job.id, 'approved', { by: 'committed' }, { client })).toBe(true);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ approval: { by: 'committed' }, attempt: 1 });
  });

  it('throws WaitTimeoutError in the handler when the timeout comes first; a later signal is refused', async () => {
    const job = await queue.add('x', { mode: 'wait-timeout', timeoutMs: 200 });
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual({ timedOut: 'approved' });
    expect(await queue.signal(job.id, 'approved', { by: 'late' })).toBe(false);
    expect((await queue.getJobSteps(job.id)).find((s) => s.name === 'approved')?.status).toBe('timed-out');
  });

  it('uses a recorded step’s result when its position changed between runs (reported, not refused)', async () => {
    const job = await queue.add('x', { mode: 'reorder' });
    await waitFor(finished(job.id));
    expect((await queue.getJob(job.id))?.result).toEqual(['two@1', 'one@1']);
    expect([count(job.id, 'one'), count(job.id, 'two')]).toEqual([1, 1]);
  });
});
