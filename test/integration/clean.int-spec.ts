import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  ObliterateRefusedError,
  OnWorkerEvent,
  PgQueueConfigError,
  Process,
  Processor,
  QueueService,
  UnrecoverableError,
  type Job,
  type JobAttemptError,
  type Queue,
} from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Issue 27, points 3 and 4: UnrecoverableError fails a job for good; clean, drain and obliterate
// remove jobs in batches, while workers run.

const runs = new Map<string, number>();
const failedEvents: { id: string; name: string }[] = [];
const held = new Set<string>();
const ran = new Set<string>();
let release: (() => void) | null = null;
let gate = new Promise<void>((r) => (release = r));

@Processor('fatal')
class Fatal {
  @Process()
  run(job: Job<{ unrecoverable: boolean }>) {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    throw job.payload.unrecoverable ? new UnrecoverableError('card declined') : new Error('try again');
  }

  @OnWorkerEvent('failed')
  failed(job: Job, error: JobAttemptError) {
    failedEvents.push({ id: job.id, name: error.name });
  }
}

@Processor('fatal-dlq')
class FatalToDlq {
  @Process()
  run() {
    throw new UnrecoverableError('no point');
  }
}

@Processor('graveyard')
class Graveyard {
  @Process()
  run() {}
}

@Processor('busy')
class Busy {
  @Process('fast')
  fast(job: Job) {
    ran.add(job.id);
  }

  @Process('hold')
  async hold(job: Job) {
    held.add(job.id);
    await gate;
  }

  @Process('boom')
  boom() {
    throw new Error('boom');
  }
}

describe('UnrecoverableError, clean, drain, obliterate', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;
  let busy: Queue;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100, rescueIntervalMs: 200 },
      queues: [
        { name: 'fatal', defaultJobOptions: { attempts: 5, backoff: { type: 'fixed', delayMs: 10 } } },
        { name: 'fatal-dlq', defaultJobOptions: { attempts: 5 }, deadLetterQueue: 'graveyard' },
        { name: 'graveyard' },
        { name: 'busy', concurrency: 4, defaultJobOptions: { attempts: 1 } },
        { name: 'idle' },
        { name: 'parents' },
      ],
      providers: [Fatal, FatalToDlq, Graveyard, Busy],
    });
    queues = app.get(QueueService);
    busy = queues.getQueue('busy');
  });
  afterAll(async () => {
    release?.();
    await app?.close();
  });

  const live = async (queue: string, state: string) =>
    (
      await t.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = $1 AND state = $2`, [
        queue,
        state,
      ])
    ).rows[0].n;
  const history = async (queue: string, state?: string) =>
    (
      await t.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1 AND ($2::text IS NULL OR state = $2)`,
        [queue, state ?? null],
      )
    ).rows[0].n;
  /** Finished jobs of `queue` made `hours` older (finished_at, the partition key: the row moves). */
  const age = (ids: string[], hours: number) =>
    t.pool.query(
      `UPDATE pgqueue.job_history SET finished_at = finished_at - $2::int * interval '1 hour' WHERE id = ANY($1::bigint[])`,
      [ids, hours],
    );

  describe('UnrecoverableError', () => {
    it('fails the job on its first attempt, attempts left or not, as a failure everywhere', async () => {
      const q = queues.getQueue('fatal');
      const [fatal, retried] = await q.addBulk([
        { name: 'x', payload: { unrecoverable: true } },
        { name: 'x', payload: { unrecoverable: false } },
      ]);
      await waitFor(async () => (await q.getJob(fatal.id))?.state === 'failed', { message: 'the unrecoverable job to fail' });
      await waitFor(async () => (await q.getJob(retried.id))?.state === 'failed', { message: 'the retried job to fail' });
      const job = await q.getJob(fatal.id);
      expect(job?.attempt).toBe(1);
      expect(runs.get(fatal.id)).toBe(1);
      expect(job?.errors.map((e) => [e.name, e.message])).toEqual([['UnrecoverableError', 'card declined']]);
      // Without it, the same handler runs its five attempts.
      expect(runs.get(retried.id)).toBe(5);
      expect(await waitFor(() => failedEvents.some((e) => e.id === fatal.id))).toBeUndefined();
      expect(failedEvents.find((e) => e.id === fatal.id)?.name).toBe('UnrecoverableError');
      expect((await q.getCounts()).failed).toBe(2);
    });

    it('goes to the dead-letter queue at once where the queue has one', async () => {
      const job = await queues.add('fatal-dlq', 'x', {});
      await waitFor(async () => (await queues.getJob(job.id))?.state === 'completed', { message: 'the dead letter to run' });
      const dead = await queues.getJob(job.id);
      expect(dead?.queue).toBe('graveyard');
      expect(dead?.errors.map((e) => e.name)).toEqual(['UnrecoverableError']);
    });
  });

  describe('clean', () => {
    it('removes finished jobs of one state older than the age, at most limit', async () => {
      const jobs = await busy.addBulk([...Array(6)].map((_, i) => ({ name: i < 4 ? 'fast' : 'boom', payload: {} })));
      await waitFor(async () => (await history('busy')) === 6, { message: 'the six jobs to finish' });
      const [c1, c2, c3, c4, f1, f2] = jobs.map((j) => j.id);
      await age([c1, c2, c3, f1, f2], 2);
      expect(await busy.clean({ state: 'completed', olderThanMs: 3 * 3600_000 })).toBe(0);
      expect(await busy.clean({ state: 'completed', olderThanMs: 3600_000, limit: 2 })).toBe(2);
      expect(await busy.clean({ state: 'completed', olderThanMs: 3600_000 })).toBe(1);
      expect((await busy.getJob(c4))?.state).toBe('completed'); // younger than the age
      expect(await queues.clean('busy', { state: 'failed', olderThanMs: 0 })).toBe(2);
      expect(await history('busy')).toBe(1);
      expect(await busy.clean({ state: 'completed', olderThanMs: 0 })).toBe(1);
    });

    it('loops over more rows than one batch (1,000 per statement)', async () => {
      await t.pool.query(
        `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                          created_at, finished_at)
         SELECT -g, 'idle', 'old', '{}', 'failed', 0, now(), 1, 1, '[]', now(), now() - interval '2 days'
         FROM generate_series(1, 2500) g`,
      );
      // Failed jobs: kept for ever by default, so the maintenance pass prunes none meanwhile.
      expect(await queues.clean('idle', { state: 'failed', olderThanMs: 86_400_000, limit: 2100 })).toBe(2100);
      expect(await queues.clean('idle', { state: 'failed', olderThanMs: 86_400_000 })).toBe(400);
      expect(await history('idle')).toBe(0);
    });

    it('refuses what it does not know, saying what to use', async () => {
      await expect(busy.clean({ state: 'completed', olderThanMs: 0, grace: 5 } as never)).rejects.toThrow(
        /Unknown option\(s\) in queue.clean\(\): "grace" \(use olderThanMs/,
      );
      await expect(busy.clean({ state: 'waiting', olderThanMs: 0 } as never)).rejects.toThrow(/queue.drain\(\)/);
      await expect(busy.clean({ state: 'failed' } as never)).rejects.toThrow(PgQueueConfigError);
      await expect(busy.clean({ state: 'failed', olderThanMs: -1 })).rejects.toThrow(/olderThanMs/);
      await expect(busy.clean({ state: 'failed', olderThanMs: 0, limit: 0 })).rejects.toThrow(/limit/);
      await expect(busy.obliterate({ Force: true } as never)).rejects.toThrow(/"Force" \(use force\)/);
    });
  });

  describe('drain', () => {
    it('removes waiting and delayed jobs while workers run, never one they claimed', async () => {
      const total = 3000;
      const added = await busy.addBulk(
        [...Array(total)].map((_, i) => ({ name: 'fast', payload: {}, opts: i % 10 === 0 ? { delayMs: 3_600_000 } : {} })),
      );
      // The workers are taking jobs: drain while they do.
      await waitFor(async () => (await history('busy', 'completed')) > 0, { message: 'the workers to start' });
      const drained = await busy.drain();
      await waitFor(async () => (await live('busy', 'active')) === 0, { message: 'the claimed jobs to finish' });
      const done = await history('busy', 'completed');
      // The delayed ones at least (exactly those when the workers took every due job first: a loaded machine).
      expect(drained).toBeGreaterThanOrEqual(total / 10);
      // Every job was either run to the end or drained: a claimed job deleted by the drain would be in neither.
      expect(done + drained).toBe(total);
      expect(await live('busy', 'waiting')).toBe(0);
      const ids = added.map((j) => j.id);
      const { rows } = await t.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE id = ANY($1::bigint[])`,
        [ids],
      );
      expect(rows[0].n).toBe(done);
      // And every job a worker took (claimed, prefetched, run) ran to the end: none was drained.
      const started = ids.filter((id) => ran.has(id));
      const { rows: ended } = await t.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE id = ANY($1::bigint[]) AND state = 'completed'`,
        [started],
      );
      expect(ended[0].n).toBe(started.length);
      expect(started.length).toBe(done);
      expect(await busy.clean({ state: 'completed', olderThanMs: 0 })).toBe(done);
    });

    it('leaves running jobs and waiting-children parents; a drained child tells its parent it was removed', async () => {
      gate = new Promise<void>((r) => (release = r));
      const running = await busy.add('hold', {});
      await waitFor(() => held.has(running.id), { message: 'the held job to start' });
      const flow = await queues.addFlow({
        queue: 'parents',
        name: 'p',
        payload: {},
        children: [{ queue: 'idle', name: 'c', payload: {} }],
      });
      const other = await queues.addFlow({
        queue: 'idle',
        name: 'p',
        payload: {},
        children: [{ queue: 'parents', name: 'c', payload: {} }],
      });
      await queues.add('idle', 'later', {}, { delayMs: 60_000 });
      expect(await busy.drain()).toBe(0);
      expect((await busy.getJob(running.id))?.state).toBe('active');
      expect(await queues.drain('idle')).toBe(2); // the child and the delayed job
      expect((await queues.getJob(other.job.id))?.state).toBe('waiting-children');
      const parent = await queues.getJob(flow.job.id);
      expect(parent?.state).toBe('failed');
      expect(parent?.errors.at(-1)?.message).toMatch(/ended removed/);
      release?.();
      await waitFor(async () => (await busy.getJob(running.id))?.state === 'completed', { message: 'the held job to end' });
    });
  });

  describe('obliterate', () => {
    it('is refused while jobs of the queue run, and removes them too with force', async () => {
      gate = new Promise<void>((r) => (release = r));
      const running = await busy.add('hold', {});
      await busy.add('fast', {}, { delayMs: 3_600_000 });
      await waitFor(() => held.has(running.id), { message: 'the held job to start' });
      const before = await history('busy');
      const refused = await busy.obliterate().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ObliterateRefusedError);
      expect(refused).toMatchObject({ queue: 'busy', activeCount: 1 });
      expect((refused as Error).message).toMatch(/Nothing was removed/);
      expect(await live('busy', 'waiting')).toBe(1);
      expect(await history('busy')).toBe(before);

      expect(await busy.obliterate({ force: true })).toBe(before + 2);
      expect(await live('busy', 'active')).toBe(0);
      expect(await history('busy')).toBe(0);
      release?.();
      // The removed job's outcome matches no row: nothing comes back into history.
      await busy.add('fast', {});
      await waitFor(async () => (await history('busy')) === 1, { message: 'a new job to run' });
      expect(await busy.getJob(running.id)).toBeNull();
    });

    it('removes live jobs of every kind and the history, a batch at a time', async () => {
      await queues.addBulk(
        'idle',
        [...Array(2200)].map(() => ({ name: 'x', payload: {} })),
      );
      await queues.addFlow({ queue: 'idle', name: 'p', payload: {}, children: [{ queue: 'parents', name: 'c', payload: {} }] });
      await t.pool.query(
        `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                          created_at, finished_at)
         SELECT -g, 'idle', 'old', '{}', (ARRAY['completed', 'failed', 'cancelled'])[g % 3 + 1], 0, now(), 1, 1, '[]', now(), now()
         FROM generate_series(1, 1500) g`,
      );
      const waitingChildren = await live('idle', 'waiting-children');
      const finished = await history('idle');
      expect(await queues.obliterate('idle')).toBe(2200 + waitingChildren + finished);
      expect(await live('idle', 'waiting')).toBe(0);
      expect(await live('idle', 'waiting-children')).toBe(0);
      expect(await history('idle')).toBe(0);
      expect(await queues.obliterate('idle', {})).toBe(0);
    });
  });
});
