import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueConfigError, Process, Processor, QueueService, type Job, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Dead letters and their redrive: queue.retry(id), retryFailed(), remove(id), a dead-letter
// queue, and retention per finished state.

const runs = new Map<string, number>();
const deadRuns: { id: string; attempt: number; errors: number; payload: unknown }[] = [];
let release: (() => void) | null = null;

@Processor('rr')
class RrProcessor {
  @Process()
  async run(job: Job<{ fail?: number; hold?: boolean }>) {
    const n = (runs.get(job.id) ?? 0) + 1;
    runs.set(job.id, n);
    if (job.payload.hold) await new Promise<void>((r) => (release = r));
    if (n <= (job.payload.fail ?? 0)) throw new Error(`run ${n} fails`);
    return n;
  }
}

@Processor('to-dlq')
class AlwaysFails {
  @Process()
  run() {
    throw new Error('always');
  }
}

@Processor('dead')
class DeadProcessor {
  @Process()
  run(job: Job) {
    deadRuns.push({ id: job.id, attempt: job.attempt, errors: job.errors.length, payload: job.payload });
  }
}

describe('retry, remove, dead letters, retention', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { fail?: number; hold?: boolean } }>;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100, rescueIntervalMs: 200, retention: { cancelledMs: 0 } },
      queues: [
        { name: 'rr', defaultJobOptions: { attempts: 1 } },
        { name: 'to-dlq', defaultJobOptions: { attempts: 2, backoff: { type: 'fixed', delayMs: 10 } }, deadLetterQueue: 'dead' },
        { name: 'dead' },
      ],
      providers: [RrProcessor, AlwaysFails, DeadProcessor],
    });
    queue = app.get(QueueService).getQueue('rr');
  });
  afterAll(async () => {
    release?.();
    await app?.close();
  });

  const stateOf = async (id: string) => (await queue.getJob(id))?.state;

  it('retry(id) runs a failed job again under its id, with fresh attempts and its errors kept', async () => {
    const job = await queue.add('x', { fail: 1 });
    await waitFor(async () => (await stateOf(job.id)) === 'failed');
    expect(await queue.retry(job.id)).toBe(true);
    await waitFor(async () => (await stateOf(job.id)) === 'completed');
    const done = await queue.getJob(job.id);
    expect(done?.attempt).toBe(1);
    expect(done?.errors.map((e) => e.message)).toEqual(['run 1 fails']);
    expect(done?.result).toBe(2);
    // Completed: it runs again too (issue 27, as Bull Board's retry), with a new result.
    expect(await queue.retry(job.id)).toBe(true);
    await waitFor(async () => (await queue.getJob(job.id))?.result === 3, { message: 'the completed job to run again' });
    expect(await queue.retry('nonsense')).toBe(false);
  });

  it('retryFailed() runs every failed job of the queue again', async () => {
    const jobs = await queue.addBulk([1, 2, 3].map(() => ({ name: 'x' as const, payload: { fail: 1 } })));
    await waitFor(async () => (await Promise.all(jobs.map((j) => stateOf(j.id)))).every((s) => s === 'failed'));
    expect(await queue.retryFailed()).toBe(3);
    await waitFor(async () => (await Promise.all(jobs.map((j) => stateOf(j.id)))).every((s) => s === 'completed'));
    expect(await queue.retryFailed()).toBe(0);
  });

  it('remove(id) deletes a waiting or finished job, never a running one', async () => {
    const waiting = await queue.add('x', {}, { delayMs: 60_000 });
    expect(await queue.remove(waiting.id)).toBe(true);
    expect(await queue.getJob(waiting.id)).toBeNull();

    const running = await queue.add('x', { hold: true });
    await waitFor(async () => (await stateOf(running.id)) === 'active');
    expect(await queue.remove(running.id)).toBe(false);
    release!();
    await waitFor(async () => (await stateOf(running.id)) === 'completed');
    expect(await queue.remove(running.id)).toBe(true);
    expect(await queue.getJob(running.id)).toBeNull();
    expect(await queue.remove(running.id)).toBe(false);
  });

  it('a job that fails its last attempt moves to the dead-letter queue, errors kept, attempts reset', async () => {
    const main = app.get(QueueService).getQueue('to-dlq');
    const job = await main.add('x', { fail: 99 });
    await waitFor(() => deadRuns.some((d) => d.id === job.id), { message: 'the job to run in the dead-letter queue' });
    expect(deadRuns.find((d) => d.id === job.id)).toEqual({ id: job.id, attempt: 1, errors: 2, payload: { fail: 99 } });
    expect((await main.getCounts()).failed).toBe(0);
    const stored = await app.get(QueueService).getJob(job.id);
    await waitFor(async () => (await app.get(QueueService).getJob(job.id))?.state === 'completed');
    expect(stored?.queue).toBe('dead');
    // Both errors (the retry's, the move's) carry their attempt's start and end from the database.
    const errors = (await app.get(QueueService).getJob(job.id))!.errors as unknown as Record<string, unknown>[];
    expect(errors).toHaveLength(2);
    for (const e of errors) expect(e).toMatchObject({ startedAt: expect.any(String), endedAt: expect.any(String) });
  });

  it('retention per state: cancelled jobs (cancelledMs: 0) are pruned, failed ones kept', async () => {
    const cancelled = await queue.add('x', {}, { delayMs: 60_000 });
    expect(await queue.cancel(cancelled.id)).toBe('cancelled');
    const failed = await queue.add('x', { fail: 1 });
    await waitFor(async () => (await stateOf(failed.id)) === 'failed');
    await waitFor(async () => (await queue.getJob(cancelled.id)) === null, {
      timeoutMs: 5000,
      message: 'the cancelled job to be pruned',
    });
    expect(await stateOf(failed.id)).toBe('failed');
  });

  it('refuses a dead-letter queue that names the queue itself', async () => {
    await expect(
      bootApp({ options: { connection: t.db.url }, queues: [{ name: 'loop', deadLetterQueue: 'loop' }] }),
    ).rejects.toThrow(PgQueueConfigError);
  });
});
