import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  CancelJobError,
  PgQueueConfigError,
  Process,
  Processor,
  QueueService,
  type ActiveJob as Job,
  type Queue,
} from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Issue 27, point 2: retryJobs, removeJobs, cancelJobs (by ids, or by a filter in batches of
// 1,000, each its own transaction), retry(id) of a completed job; safe while workers run.

const held = new Map<string, AbortSignal>();
const ran = new Map<string, number>();
let release: (() => void) | null = null;
let gate = new Promise<void>((r) => (release = r));

@Processor('work')
class Work {
  @Process('fast')
  fast(job: Job) {
    ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
  }

  @Process('boom')
  boom(job: Job) {
    ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
    throw new Error('boom');
  }

  /** Runs until the gate opens, or until cancelled (job.signal). */
  @Process('hold')
  async hold(job: Job) {
    held.set(job.id, job.signal);
    await Promise.race([
      gate,
      new Promise<never>((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason as Error))),
    ]);
    ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
  }
}

describe('retryJobs, removeJobs, cancelJobs', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;
  let work: Queue;
  let idle: Queue;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'work', concurrency: 4, defaultJobOptions: { attempts: 1 } }, { name: 'idle' }, { name: 'parents' }],
      providers: [Work],
    });
    queues = app.get(QueueService);
    work = queues.getQueue('work');
    idle = queues.getQueue('idle');
  });
  afterAll(async () => {
    release?.();
    await app?.close();
  });

  const one = async (sql: string, params: unknown[] = []) => (await t.pool.query<{ n: number }>(sql, params)).rows[0].n;
  const live = (queue: string, state?: string) =>
    one(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = $1 AND ($2::text IS NULL OR state = $2)`, [
      queue,
      state ?? null,
    ]);
  const history = (queue: string, state?: string) =>
    one(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1 AND ($2::text IS NULL OR state = $2)`, [
      queue,
      state ?? null,
    ]);
  /** `n` finished jobs of `queue` written straight into history (ids after FAR + base), `hours` ago. */
  const finished = (queue: string, n: number, state: string, name: string, base: number, hours = 0) =>
    t.pool.query(
      `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                        created_at, finished_at, result)
       SELECT 1000000000000 + $5::int + g, $1, $4, '{}', $3, 0, now(), 1, 2,
              pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('attempt', 1, 'name', 'Error', 'message', 'old')),
              now(), now() - $6::int * interval '1 hour', CASE WHEN $3 = 'completed' THEN '42'::jsonb END
       FROM generate_series(1, $2::int) g`,
      [queue, n, state, name, base, hours],
    );

  describe('retryJobs', () => {
    it('runs finished jobs of one state (and name, and age) again under their ids, errors kept, in batches', async () => {
      await finished('idle', 2300, 'failed', 'a', 0, 48);
      await finished('idle', 200, 'failed', 'b', 10_000, 48);
      await finished('idle', 100, 'failed', 'a', 20_000, 0);
      await finished('idle', 50, 'cancelled', 'a', 30_000, 48);
      const day = Date.now() - 24 * 3600_000;
      expect(await idle.retryJobs({ state: 'failed', name: 'a', finishedBefore: new Date(day) })).toBe(2300);
      expect(await live('idle', 'waiting')).toBe(2300);
      expect(await history('idle', 'failed')).toBe(300);
      const back = await idle.getJob('1000000000001');
      expect(back).toMatchObject({ state: 'waiting', attempt: 0, name: 'a' });
      expect(back?.errors.map((e) => e.message)).toEqual(['old']);
      // finishedBefore as epoch milliseconds (BullMQ's timestamp), then every name.
      expect(await queues.retryJobs('idle', { state: 'failed', finishedBefore: day })).toBe(200);
      expect(await idle.retryJobs({ state: 'failed' })).toBe(100);
      expect(await idle.retryJobs({ state: 'cancelled' })).toBe(50);
      expect(await idle.retryJobs({ state: 'failed' })).toBe(0);
      expect(await history('idle')).toBe(0);
      await idle.drain();
    });

    it('runs completed jobs again, retry(id) included, and workers take them', async () => {
      const [a, b, c] = await work.addBulk([...Array(3)].map(() => ({ name: 'fast', payload: {} })));
      await waitFor(async () => (await history('work', 'completed')) >= 3, {
        message: 'the three jobs to complete',
        timeoutMs: 20_000,
      });
      expect(await work.retry(a.id)).toBe(true);
      expect(await work.retryJobs({ state: 'completed' })).toBeGreaterThanOrEqual(2);
      // At least twice: `a`, retried first, may run and complete again before retryJobs, which then
      // takes it a third time (it is completed again by then): an exact 2 raced on fast runners.
      await waitFor(() => [a, b, c].every((j) => (ran.get(j.id) ?? 0) >= 2), {
        message: 'each job to run a second time',
        timeoutMs: 20_000,
      });
      await waitFor(async () => (await work.getJob(c.id))?.state === 'completed', {
        message: 'c to complete again',
        timeoutMs: 20_000,
      });
      expect((await work.getJob(c.id))?.result).toBeNull();
    });

    it('refuses a call without a state, and what it does not know', async () => {
      await expect(idle.retryJobs(undefined as never)).rejects.toThrow(/needs state/);
      await expect(idle.retryJobs({ state: 'waiting' } as never)).rejects.toThrow(/invalid state "waiting"/);
      await expect(idle.retryJobs({ state: 'failed', count: 10 } as never)).rejects.toThrow(/"count" \(use nothing/);
      await expect(idle.retryJobs({ state: 'failed', timestamp: 1 } as never)).rejects.toThrow(/use finishedBefore/);
      await expect(idle.retryJobs({ state: 'failed', finishedBefore: 'yesterday' } as never)).rejects.toThrow(PgQueueConfigError);
    });
  });

  describe('removeJobs', () => {
    it('removes by filter every state but running, in batches, a name only when asked', async () => {
      await idle.addBulk([...Array(2500)].map((_, i) => ({ name: i % 5 === 0 ? 'keep' : 'x', payload: {} })));
      await idle.addBulk([...Array(1200)].map(() => ({ name: 'x', payload: {}, opts: { delayMs: 3_600_000 } })));
      await finished('idle', 1500, 'completed', 'x', 40_000, 30);
      await finished('idle', 10, 'completed', 'x', 50_000, 0);
      expect(await idle.removeJobs({ state: 'waiting', name: 'x' })).toBe(2000);
      expect(await live('idle', 'waiting')).toBe(1700);
      expect(await idle.removeJobs({ state: 'delayed' })).toBe(1200);
      expect(await idle.removeJobs({ state: 'completed', finishedBefore: Date.now() - 3600_000 })).toBe(1500);
      expect(await history('idle', 'completed')).toBe(10);
      expect(await queues.removeJobs('idle', { states: ['waiting', 'completed'] })).toBe(510);
      expect(await live('idle')).toBe(0);
      expect(await history('idle')).toBe(0);
    });

    it('removes by ids (waiting or finished, never running), in the caller transaction, a child telling its parent', async () => {
      gate = new Promise<void>((r) => (release = r));
      const running = await work.add('hold', {});
      await waitFor(() => held.has(running.id), { message: 'the held job to start', timeoutMs: 20_000 });
      const [w1, w2] = await idle.addBulk([
        { name: 'x', payload: {} },
        { name: 'x', payload: {}, opts: { delayMs: 60_000 } },
      ]);
      const flow = await queues.addFlow({
        queue: 'parents',
        name: 'p',
        payload: {},
        children: [{ queue: 'idle', name: 'c', payload: {} }],
      });
      expect(await work.removeJobs({ ids: [running.id, '999999'] })).toBe(0);
      expect((await work.getJob(running.id))?.state).toBe('active');

      // In a transaction that rolls back: nothing removed.
      const client = await t.pool.connect();
      try {
        await client.query('BEGIN');
        expect(await idle.removeJobs({ ids: [w1.id, w2.id] }, { client })).toBe(2);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      expect(await live('idle')).toBe(3);
      expect(await idle.removeJobs({ ids: [w1.id, w2.id, flow.children[0].job.id, w1.id] })).toBe(3);
      expect(await live('idle')).toBe(0);
      const parent = await queues.getJob(flow.job.id);
      expect(parent?.state).toBe('failed');
      expect(parent?.errors.at(-1)?.message).toMatch(/ended removed/);
      release?.();
      await waitFor(async () => (await work.getJob(running.id))?.state === 'completed', {
        message: 'the held job to end',
        timeoutMs: 20_000,
      });
    });

    it('refuses a filter without states, a running state, and what it does not know', async () => {
      await expect(idle.removeJobs({} as never)).rejects.toThrow(/needs state or states/);
      await expect(idle.removeJobs({ state: 'active' } as never)).rejects.toThrow(/never removed: cancelJobs\(\) it first/);
      await expect(idle.removeJobs({ state: 'waiting', finishedBefore: 1 })).rejects.toThrow(/finished states only/);
      await expect(idle.removeJobs({ state: 'waiting', states: ['failed'] } as never)).rejects.toThrow(/not both/);
      await expect(idle.removeJobs({ ids: ['1'], state: 'failed' } as never)).rejects.toThrow(/Unknown option/);
      await expect(idle.removeJobs({ ids: ['abc'] })).rejects.toThrow(/"abc" is not a job id/);
      await expect(idle.removeJobs({ states: [] })).rejects.toThrow(/non-empty/);
      const client = await t.pool.connect();
      try {
        await expect(idle.removeJobs({ state: 'failed' }, { client })).rejects.toThrow(/cannot join your transaction/);
      } finally {
        client.release();
      }
    });
  });

  describe('cancelJobs', () => {
    it('cancels waiting jobs by filter (to history) and signals running ones, as cancel(id)', async () => {
      gate = new Promise<void>((r) => (release = r));
      const running = await work.addBulk([...Array(2)].map(() => ({ name: 'hold', payload: {} })));
      await waitFor(() => running.every((j) => held.has(j.id)), { message: 'the held jobs to start', timeoutMs: 20_000 });
      await idle.addBulk([...Array(1100)].map(() => ({ name: 'x', payload: {} })));
      await idle.add('x', {}, { delayMs: 60_000 });
      expect(await idle.cancelJobs({ state: 'waiting' })).toBe(1100);
      expect(await history('idle', 'cancelled')).toBe(1100);
      const job = await idle.getJob((await idle.getJobs({ state: 'cancelled', limit: 1 })).jobs[0].id);
      expect(job?.errors.at(-1)).toMatchObject({ name: 'CancelJobError', message: expect.stringMatching(/cancelJobs/) });
      expect(await queues.cancelJobs('idle', { states: ['waiting', 'delayed'] })).toBe(1);

      expect(await work.cancelJobs({ state: 'active' })).toBe(2);
      await waitFor(() => running.every((j) => held.get(j.id)?.aborted), {
        message: 'both handlers to see job.signal',
        timeoutMs: 20_000,
      });
      expect(held.get(running[0].id)?.reason).toBeInstanceOf(CancelJobError);
      await waitFor(async () => (await history('work', 'cancelled')) === 2, {
        message: 'the two running jobs to end cancelled',
        timeoutMs: 20_000,
      });
      release?.();
    });

    it('cancels by ids, in the caller transaction', async () => {
      const [a, b] = await idle.addBulk([...Array(2)].map(() => ({ name: 'x', payload: {} })));
      const client = await t.pool.connect();
      try {
        await client.query('BEGIN');
        expect(await idle.cancelJobs({ ids: [a.id, b.id] }, { client })).toBe(2);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      expect((await idle.getJob(a.id))?.state).toBe('waiting');
      expect(await idle.cancelJobs({ ids: [a.id, b.id, '123456789'] })).toBe(2);
      expect((await idle.getJob(b.id))?.state).toBe('cancelled');
      await expect(idle.cancelJobs({ state: 'completed' } as never)).rejects.toThrow(/removeJobs\(\) it/);
      await expect(idle.cancelJobs({ name: 'x' } as never)).rejects.toThrow(/needs state or states/);
    });
  });

  describe('while workers run', () => {
    it('never half-changes a running job: every job ends in exactly one place', async () => {
      gate = new Promise<void>((r) => (release = r));
      const holds = await work.addBulk([...Array(4)].map(() => ({ name: 'hold', payload: {} })));
      await waitFor(() => holds.every((j) => held.has(j.id)), {
        message: 'four held jobs to fill the workers',
        timeoutMs: 20_000,
      });
      const total = 3000;
      const added = await work.addBulk([...Array(total)].map(() => ({ name: 'fast', payload: {} })));
      const failedBefore = await history('work', 'failed');
      // Open the gate while the sweeps run: workers claim and finish jobs as the batches pass.
      release?.();
      const [removed, cancelled] = await Promise.all([
        work.removeJobs({ state: 'waiting', name: 'fast' }),
        work.cancelJobs({ state: 'waiting' }),
      ]);
      await waitFor(async () => (await live('work')) === 0, {
        message: 'the workers to finish what they took',
        timeoutMs: 20_000,
      });
      const ids = added.map((j) => j.id);
      const { rows } = await t.pool.query<{ state: string; n: number }>(
        `SELECT state, count(*)::int AS n FROM pgqueue.job_history WHERE id = ANY($1::bigint[]) GROUP BY state`,
        [ids],
      );
      const by = Object.fromEntries(rows.map((r) => [r.state, r.n]));
      // Removed ones are nowhere; cancelled ones were waiting; completed ones ran once, to the end.
      expect((by.completed ?? 0) + (by.cancelled ?? 0) + removed).toBe(total);
      expect(by.cancelled ?? 0).toBe(cancelled);
      expect(await history('work', 'failed')).toBe(failedBefore);
      const ranIds = ids.filter((id) => ran.has(id));
      expect(ranIds.length).toBe(by.completed ?? 0);
      expect(ranIds.every((id) => ran.get(id) === 1)).toBe(true);
    });

    it('retryJobs while workers take the retried jobs: each runs once more, none twice', async () => {
      const jobs = await work.addBulk([...Array(1500)].map(() => ({ name: 'boom', payload: {} })));
      await waitFor(async () => (await history('work', 'failed')) >= 1500, { message: 'the jobs to fail', timeoutMs: 20_000 });
      const retried = await work.retryJobs({ state: 'failed', name: 'boom' });
      expect(retried).toBeGreaterThanOrEqual(1500);
      await waitFor(() => jobs.every((j) => ran.get(j.id) === 2), { message: 'each to run a second time', timeoutMs: 20_000 });
      await waitFor(async () => (await live('work')) === 0, { message: 'the second attempts to end', timeoutMs: 20_000 });
      expect(jobs.every((j) => ran.get(j.id) === 2)).toBe(true);
    });
  });
});
