import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  CancelJobError,
  OnWorkerEvent,
  Process,
  Processor,
  QueueService,
  SnoozeJobError,
  type Job,
  type PgQueueModuleOptions,
  type Queue,
} from '../../lib';
import { Injectable } from '@nestjs/common';
import { bootApp } from '../support/app';
import { afterFreshClaim } from '../support/claims';
import { useTestDatabase, waitFor } from '../support/database';

// queue.cancel(id), CancelJobError / SnoozeJobError thrown by handlers, and pause / resume,
// on one node and across two (a producer-only app and a worker app on one database).

type Payload = { mode: 'wait-signal' | 'ignore-signal' | 'cancel-self' | 'snooze-once' | 'quick' };
const seen = { started: [] as string[], reasons: new Map<string, unknown>(), attempts: new Map<string, number[]>() };
const events: string[] = [];

@Processor('cp')
class CpProcessor {
  @Process()
  async run(job: Job<Payload>) {
    seen.started.push(job.id);
    seen.attempts.set(job.id, [...(seen.attempts.get(job.id) ?? []), job.attempt]);
    const signal = (job as Job<Payload> & { signal: AbortSignal }).signal;
    switch (job.payload.mode) {
      case 'wait-signal':
        await new Promise<void>((_, reject) => {
          signal.addEventListener('abort', () => {
            seen.reasons.set(job.id, signal.reason);
            reject(new Error('aborted by the signal'));
          });
        });
        return;
      case 'ignore-signal':
        await waitFor(() => signal.aborted, { timeoutMs: 10_000 });
        return 'finished anyway';
      case 'cancel-self':
        throw new CancelJobError('nothing to do any more');
      case 'snooze-once':
        if ((seen.attempts.get(job.id) ?? []).length === 1) throw new SnoozeJobError(200);
        return 'after the nap';
      default:
        return 'quick';
    }
  }
}

@Injectable()
class EventLog {
  @OnWorkerEvent('cancelled')
  cancelled(job: Job) {
    events.push(`cancelled:${job.id}`);
  }
  @OnWorkerEvent('snoozed')
  snoozed(job: Job, delayMs: number) {
    events.push(`snoozed:${job.id}:${delayMs}`);
  }
}

describe('cancellation, snooze, pause', () => {
  const t = useTestDatabase();
  let worker: INestApplicationContext;
  let producer: INestApplicationContext;
  let queue: Queue<{ x: Payload }>;

  const base = (): PgQueueModuleOptions => ({ connection: t.db.url, pollIntervalMs: 100, rescueIntervalMs: 500 });

  beforeAll(async () => {
    const cp = { name: 'cp', concurrency: 5, defaultJobOptions: { attempts: 5 } };
    worker = await bootApp({ options: base(), queues: [cp], providers: [CpProcessor, EventLog] });
    // A second node with no workers: cancels and pauses from it must reach the worker node.
    producer = await bootApp({ options: { ...base(), workers: false }, queues: [cp, { name: 'elsewhere' }] });
    queue = producer.get(QueueService).getQueue<{ x: Payload }>('cp');
  });
  afterAll(async () => {
    await worker?.close();
    await producer?.close();
  });

  const stateOf = async (id: string) => (await queue.getJob(id))?.state;

  it('a waiting (delayed) job is cancelled at once and never runs', async () => {
    const job = await queue.add('x', { mode: 'quick' }, { delayMs: 60_000 });
    expect(await queue.cancel(job.id)).toBe('cancelled');
    const stored = await queue.getJob(job.id);
    expect(stored?.state).toBe('cancelled');
    expect(stored?.errors.map((e) => e.name)).toEqual(['CancelJobError']);
    expect(seen.started).not.toContain(job.id);
    expect(await queue.cancel(job.id)).toBeNull(); // finished: nothing left to cancel
  });

  it('a running job on another node gets its signal fired with CancelJobError and ends cancelled, not retried', async () => {
    const job = await queue.add('x', { mode: 'wait-signal' });
    await waitFor(() => seen.started.includes(job.id), { message: 'the job to start' });
    expect(await queue.cancel(job.id)).toBe('cancelling');
    await waitFor(async () => (await stateOf(job.id)) === 'cancelled', { message: 'the job to end cancelled' });
    expect(seen.reasons.get(job.id)).toBeInstanceOf(CancelJobError);
    expect(seen.attempts.get(job.id)).toEqual([1]);
    await waitFor(() => events.includes(`cancelled:${job.id}`));
  });

  it('a handler that completes despite the cancel wins: the job is completed', async () => {
    const job = await queue.add('x', { mode: 'ignore-signal' });
    await waitFor(() => seen.started.includes(job.id));
    expect(await queue.cancel(job.id)).toBe('cancelling');
    await waitFor(async () => (await stateOf(job.id)) === 'completed');
    expect((await queue.getJob(job.id))?.result).toBe('finished anyway');
  });

  it('CancelJobError thrown by a handler ends the job cancelled, whatever attempts are left', async () => {
    const job = await queue.add('x', { mode: 'cancel-self' });
    await waitFor(async () => (await stateOf(job.id)) === 'cancelled');
    const stored = await queue.getJob(job.id);
    expect(stored?.attempt).toBe(1);
    expect(stored?.errors.map((e) => e.message)).toEqual(['nothing to do any more']);
  });

  it('SnoozeJobError runs the job again later without using an attempt', async () => {
    const job = await queue.add('x', { mode: 'snooze-once' });
    await waitFor(async () => (await stateOf(job.id)) === 'completed', { message: 'the snoozed job to complete' });
    expect(seen.attempts.get(job.id)).toEqual([1, 1]);
    const stored = await queue.getJob(job.id);
    expect(stored?.attempt).toBe(1);
    expect(stored?.errors).toEqual([]);
    expect(events).toContain(`snoozed:${job.id}:200`);
  });

  it('cancel answers null for unknown ids, ids of other queues and ids that are not numbers', async () => {
    expect(await queue.cancel('999999999')).toBeNull();
    expect(await queue.cancel('not-an-id')).toBeNull();
    const other = await producer.get(QueueService).add('elsewhere', 'x', {}, { delayMs: 60_000 });
    expect(await queue.cancel(other.id)).toBeNull();
    expect(await producer.get(QueueService).getQueue('elsewhere').cancel(other.id)).toBe('cancelled');
  });

  it('a cancel inside a transaction that rolls back leaves the job waiting', async () => {
    const job = await queue.add('x', { mode: 'quick' }, { delayMs: 60_000 });
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      expect(await queue.cancel(job.id, { client })).toBe('cancelled');
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await stateOf(job.id)).toBe('delayed');
    expect(await queue.cancel(job.id)).toBe('cancelled');
  });

  it('pause stops every node claiming the queue, survives in the database, and resume wakes them', async () => {
    await queue.pause();
    expect(await queue.isPaused()).toBe(true);
    const job = await queue.add('x', { mode: 'quick' });
    // The worker node has since looked at the queue (a claim begun after the job committed was
    // answered): it must not have claimed the job.
    await afterFreshClaim(worker, 'cp');
    expect(seen.started).not.toContain(job.id);
    expect(await stateOf(job.id)).toBe('waiting');
    await queue.resume();
    expect(await queue.isPaused()).toBe(false);
    await waitFor(async () => (await stateOf(job.id)) === 'completed', {
      timeoutMs: 2000,
      message: 'the job to run after resume',
    });
  });
});

describe('cancellation without LISTEN', () => {
  const t = useTestDatabase();

  it('reaches the running handler through the heartbeat in poll-only mode', async () => {
    const options: PgQueueModuleOptions = {
      connection: t.db.url,
      listen: false,
      pollIntervalMs: 100,
      leaseMs: 3000,
      heartbeatIntervalMs: 200,
    };
    const app = await bootApp({ options, queues: [{ name: 'cp' }], providers: [CpProcessor] });
    try {
      const queue = app.get(QueueService).getQueue<{ x: Payload }>('cp');
      const job = await queue.add('x', { mode: 'wait-signal' });
      await waitFor(() => seen.started.includes(job.id));
      expect(await queue.cancel(job.id)).toBe('cancelling');
      await waitFor(async () => (await queue.getJob(job.id))?.state === 'cancelled', {
        message: 'the heartbeat to deliver the cancel',
      });
      expect(seen.reasons.get(job.id)).toBeInstanceOf(CancelJobError);
    } finally {
      await app.close();
    }
  });
});
