import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import {
  OnWorkerEvent,
  PgQueueConfigError,
  PgQueuePayloadError,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type Job,
  type JobProgress,
} from '../../lib';
import { resolveModuleOptions } from '../../lib/core/options/module-checks';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// job.updateProgress(): stored on the row (throttled, guarded by the lease), visible in getJob and
// in history, kept across retries, emitted as a 'progress' event. Writes are counted by a trigger
// on the jobs table (a statement that sets `progress` fires it), not by timing.

interface Work {
  mode: 'loop' | 'gate' | 'retry' | 'bad' | 'steal';
  n?: number;
}

const gates = new Map<string, () => void>();
const gateReached = new Set<string>();
const seenAtStart = new Map<string, (JobProgress | null)[]>();
const rejections = new Map<string, string[]>();
let stealLease: ((id: string) => Promise<void>) | null = null;

@Processor('prog')
class ProgressProcessor {
  @Process('work')
  async work(job: ActiveJob<Work>) {
    const p = job.payload;
    seenAtStart.set(job.id, [...(seenAtStart.get(job.id) ?? []), job.progress]);
    if (p.mode === 'loop') {
      for (let i = 1; i <= (p.n ?? 10_000); i++) await job.updateProgress({ done: i, total: p.n ?? 10_000 });
      return 'looped';
    }
    if (p.mode === 'gate') {
      await job.updateProgress(42);
      gateReached.add(job.id);
      await new Promise<void>((resolve) => gates.set(job.id, resolve));
      await job.updateProgress(43);
      return 'gated';
    }
    if (p.mode === 'retry') {
      if (job.attempt === 1) {
        await job.updateProgress({ stage: 'download' });
        throw new Error('first attempt fails after reporting progress');
      }
      await job.updateProgress(100);
      return 'retried';
    }
    if (p.mode === 'steal') {
      await job.updateProgress(1);
      // Another worker takes the job over (as after a lost lease): this node's writes must miss.
      await stealLease!(job.id);
      await job.updateProgress(99);
      return 'stolen';
    }
    const messages: string[] = [];
    for (const bad of ['half', Number.NaN, [1, 2], null, { big: 'x'.repeat(5000) }, { f: () => 1 }]) {
      try {
        await job.updateProgress(bad as unknown as JobProgress);
        messages.push('accepted');
      } catch (err) {
        messages.push(`${(err as Error).name}: ${(err as Error).message}`);
        if (!(err instanceof PgQueuePayloadError)) messages.push('not a PgQueuePayloadError');
      }
    }
    rejections.set(job.id, messages);
    return 'bad';
  }
}

const decorated: [string, JobProgress][] = [];

@Injectable()
class ProgressListener {
  @OnWorkerEvent('progress', { queue: 'prog' })
  onProgress(job: Job, value: JobProgress) {
    decorated.push([job.id, value]);
  }
}

describe('job.updateProgress()', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  const writes = async (id: string): Promise<number> =>
    (await t.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM progress_writes WHERE job_id = $1', [id])).rows[0].n;
  const finished = (id: string, state = 'completed') =>
    waitFor(async () => (await queues.getJob(id))?.state === state, { message: `job ${id} to be ${state}`, timeoutMs: 15_000 });

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, schema: 'pgqueue', progressIntervalMs: 300, pollIntervalMs: 200 },
      queues: [{ name: 'prog', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10 } } }],
      providers: [ProgressProcessor, ProgressListener],
    });
    // Each statement that sets jobs.progress on a row (UPDATE OF progress) is counted.
    await t.pool.query(`
      CREATE TABLE progress_writes (job_id bigint, value jsonb);
      CREATE FUNCTION count_progress_write() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO progress_writes VALUES (NEW.id, NEW.progress); RETURN NEW; END $$;
      CREATE TRIGGER progress_write BEFORE UPDATE OF progress ON pgqueue.jobs
        FOR EACH ROW EXECUTE FUNCTION count_progress_write();`);
    stealLease = async (id) => {
      await waitFor(
        async () => (await t.pool.query('SELECT 1 FROM pgqueue.jobs WHERE id = $1 AND progress = $2', [id, 1])).rowCount === 1,
      );
      await t.pool.query(`UPDATE pgqueue.jobs SET locked_by = 'another-node' WHERE id = $1`, [id]);
    };
    await app.init();
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    for (const open of gates.values()) open();
    await app?.close();
  });

  it('10,000 calls in a loop make at most 3 writes, fire 10,000 events, and the last value lands in history', async () => {
    const events: JobProgress[] = [];
    const sup = runtimeOf(app).supervisor;
    const onProgress = (job: Job, value: JobProgress) => {
      if (job.queue === 'prog') events.push(value);
    };
    sup.on('progress', onProgress);
    try {
      const job = await queues.add<Work>('prog', 'work', { mode: 'loop', n: 10_000 });
      await finished(job.id);
      // One write at the first call, one with the latest value when the attempt settles (the
      // 300 ms interval may end once inside the loop on a slow machine: one more).
      const n = await writes(job.id);
      expect(n).toBeGreaterThanOrEqual(1);
      expect(n).toBeLessThanOrEqual(3);
      expect(events).toHaveLength(10_000);
      expect(events[9_999]).toEqual({ done: 10_000, total: 10_000 });
      const done = await queues.getJob(job.id);
      expect(done).toMatchObject({ state: 'completed', result: 'looped', progress: { done: 10_000, total: 10_000 } });
      expect(decorated.filter(([id]) => id === job.id)).toHaveLength(10_000);
    } finally {
      sup.off('progress', onProgress);
    }
  });

  it('a running job shows its progress in getJob; the value set just before it returns still lands', async () => {
    const job = await queues.add<Work>('prog', 'work', { mode: 'gate' });
    await waitFor(() => gateReached.has(job.id), { message: 'handler to report 42' });
    await waitFor(async () => (await queues.getJob(job.id))?.progress === 42, { message: 'progress 42 in getJob' });
    expect(await queues.getJob(job.id)).toMatchObject({ state: 'active', progress: 42 });
    gates.get(job.id)!();
    await finished(job.id);
    // 43, reported just before the handler returned, is written before the outcome (at once if the
    // interval since 42 is over, else by the flush): not lost.
    expect(await queues.getJob(job.id)).toMatchObject({ state: 'completed', progress: 43 });
    expect(await writes(job.id)).toBe(2);
  });

  it('progress is kept across a retry: the next attempt starts from it, and the last one is in history', async () => {
    const job = await queues.add<Work>('prog', 'work', { mode: 'retry' }, { attempts: 2 });
    await finished(job.id);
    expect(seenAtStart.get(job.id)).toEqual([null, { stage: 'download' }]);
    expect(await queues.getJob(job.id)).toMatchObject({ state: 'completed', attempt: 2, progress: 100 });
  });

  it('queue.retry(id) of a failed job keeps its progress: the new attempt starts from it', async () => {
    const job = await queues.add<Work>('prog', 'work', { mode: 'retry' }, { attempts: 1 });
    await finished(job.id, 'failed');
    expect(await queues.getJob(job.id)).toMatchObject({ state: 'failed', progress: { stage: 'download' } });
    // attempt is back to 0, so the handler's first-attempt branch fails it again; what matters is what it started from.
    expect(await queues.getQueue('prog').retry(job.id)).toBe(true);
    await waitFor(async () => (seenAtStart.get(job.id) ?? []).length === 2, { message: 'the retried attempt to start' });
    expect(seenAtStart.get(job.id)).toEqual([null, { stage: 'download' }]);
    await finished(job.id, 'failed');
  });

  it('a write after this node lost the lease changes nothing', async () => {
    const worker = runtimeOf(app).supervisor;
    const droppedBefore = worker.unmatchedOutcomes;
    const job = await queues.add<Work>('prog', 'work', { mode: 'steal' });
    await waitFor(async () => {
      const { rows } = await t.pool.query(`SELECT 1 FROM pgqueue.jobs WHERE id = $1 AND locked_by = 'another-node'`, [job.id]);
      return rows.length === 1;
    });
    // The handler returned; its last progress (99) and its outcome are refused by the guard.
    await waitFor(() => worker.unmatchedOutcomes > droppedBefore, { message: 'the outcome to be dropped' });
    const { rows } = await t.pool.query(`SELECT progress, state FROM pgqueue.jobs WHERE id = $1`, [job.id]);
    expect(rows).toEqual([{ progress: 1, state: 'active' }]);
    // The 99 was sent (the flush runs before the outcome, which was dropped) but changed no row.
    expect((await t.pool.query(`SELECT value FROM progress_writes WHERE job_id = $1`, [job.id])).rows).toEqual([{ value: 1 }]);
    await t.pool.query(`DELETE FROM pgqueue.jobs WHERE id = $1`, [job.id]);
  });

  it('anything but a finite number or a small JSON object is refused with PgQueuePayloadError saying what to pass', async () => {
    const job = await queues.add<Work>('prog', 'work', { mode: 'bad' });
    await finished(job.id);
    const m = rejections.get(job.id)!;
    expect(m).toHaveLength(6);
    expect(m[0]).toContain('"half" is not a progress value; pass a finite number');
    expect(m[1]).toContain('is not a progress value');
    expect(m[2]).toContain('is not a progress value');
    expect(m[3]).toContain('null is not a progress value');
    expect(m[4]).toContain('over maxProgressBytes (4096)');
    expect(m[5]).toContain('cannot be stored as JSON');
    expect(m.every((x) => x.startsWith('PgQueuePayloadError'))).toBe(true);
    expect((await queues.getJob(job.id))?.progress).toBeNull();
    expect(await writes(job.id)).toBe(0);
  });

  it('progressIntervalMs and maxProgressBytes are validated at boot', () => {
    expect(() => resolveModuleOptions({ progressIntervalMs: 5 })).toThrow(PgQueueConfigError);
    expect(() => resolveModuleOptions({ progressIntervalMs: 5 })).toThrow(/Invalid progressIntervalMs: 5 \(it is below 10\)/);
    expect(() => resolveModuleOptions({ maxProgressBytes: 1.5 as number })).toThrow(/maxProgressBytes/);
    expect(resolveModuleOptions({})).toMatchObject({ progressIntervalMs: 500, maxProgressBytes: 4096 });
  });
});
