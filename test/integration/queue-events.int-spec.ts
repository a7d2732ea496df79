import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  JobFinishedWithError,
  JobNotFoundError,
  Process,
  Processor,
  QueueService,
  SnoozeJobError,
  UnrecoverableError,
  WaitForJobTimeoutError,
  type ActiveJob,
  type Job,
  type JobAttemptError,
  type LaggedEvent,
  type QueueEvent,
} from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Cross-process events (issue 28 points 1 and 2): a producer-only app (workers: false) hears what
// a worker app writes, each event confirmed by a read; a forged NOTIFY never reaches a listener;
// waitForJob / waitUntilFinished before and after the end, on failure and on timeout. The same
// across two OS processes: queue-events-processes.int-spec.ts.

const gates = new Map<string, () => void>();
const snoozed = new Set<string>();

@Processor('ev')
class EventsProcessor {
  @Process('ok')
  ok(job: ActiveJob<{ n: number }>) {
    return { doubled: job.payload.n * 2 };
  }

  @Process('boom')
  boom() {
    throw new UnrecoverableError('the export broke');
  }

  @Process('flaky')
  flaky(job: ActiveJob) {
    if (job.attempt === 1) throw new Error('first attempt fails');
    return 'second time lucky';
  }

  @Process('gated')
  gated(job: ActiveJob<{ tag: string }>) {
    return new Promise((resolve) => gates.set(job.payload.tag, () => resolve(job.payload.tag)));
  }

  @Process('cancellable')
  cancellable(job: ActiveJob<{ tag: string }>) {
    return new Promise((_resolve, reject) => {
      gates.set(job.payload.tag, () => undefined);
      job.signal.addEventListener('abort', () => reject(job.signal.reason as Error));
    });
  }

  @Process('progress')
  async progress(job: ActiveJob<{ tag: string }>) {
    await job.updateProgress(42);
    await new Promise<void>((resolve) => gates.set(job.payload.tag, resolve));
    return 'done';
  }

  @Process('snooze')
  snooze(job: ActiveJob<{ tag: string }>) {
    if (!snoozed.has(job.payload.tag)) {
      snoozed.add(job.payload.tag);
      // Long enough that the event's confirming read finds the row still snoozed: a snooze leaves
      // no other trace, so once the job has run again the hint cannot be confirmed (docs/events.md).
      throw new SnoozeJobError(3_000);
    }
    return 'woke';
  }
}

describe('cross-process queue events', () => {
  const t = useTestDatabase();
  let worker: INestApplicationContext;
  let producer: INestApplicationContext;
  const WAIT = { timeoutMs: 20_000 };
  const retryFast = { attempts: 2, backoff: { type: 'fixed' as const, delayMs: 10 } };

  beforeAll(async () => {
    worker = await bootApp({
      options: { connection: t.db.url, progressIntervalMs: 10 },
      queues: [{ name: 'ev' }],
      providers: [EventsProcessor],
    });
    producer = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'ev' }] });
  });
  afterAll(async () => {
    await producer?.close();
    await worker?.close();
  });

  const queues = () => producer.get(QueueService);

  it('a producer-only app hears completed, failed, retrying, progress and snoozed, with what the rows hold', async () => {
    const events = queues().queueEvents('ev');
    const heard: [string, string, unknown][] = [];
    events.on('completed', (job, result) => heard.push(['completed', job.id, result]));
    events.on('failed', (job, err) => heard.push(['failed', job.id, err.message]));
    events.on('retrying', (job, err) => heard.push(['retrying', job.id, err.message]));
    events.on('progress', (job, value) => heard.push(['progress', job.id, value]));
    events.on('snoozed', (job) => heard.push(['snoozed', job.id, job.state]));
    try {
      // Events committed before the LISTEN is active are not replayed: wait for it, as a user would.
      await events.waitUntilReady({ timeoutMs: 20_000 });
      const ok = await queues().add('ev', 'ok', { n: 21 });
      const boom = await queues().add('ev', 'boom', {});
      const flaky = await queues().add('ev', 'flaky', {}, retryFast);
      const prog = await queues().add('ev', 'progress', { tag: 'p1' });
      const snz = await queues().add('ev', 'snooze', { tag: 's1' });
      await waitFor(() => heard.some(([e, id]) => e === 'progress' && id === prog.id), { ...WAIT, message: 'progress' });
      gates.get('p1')!();
      await waitFor(
        () =>
          [ok.id, flaky.id, prog.id, snz.id].every((id) => heard.some(([e, i]) => e === 'completed' && i === id)) &&
          heard.some(([e, id]) => e === 'failed' && id === boom.id),
        { ...WAIT, message: 'every job to end' },
      );
      expect(heard).toContainEqual(['completed', ok.id, { doubled: 42 }]);
      expect(heard).toContainEqual(['failed', boom.id, 'the export broke']);
      expect(heard).toContainEqual(['retrying', flaky.id, 'first attempt fails']);
      expect(heard).toContainEqual(['completed', flaky.id, 'second time lucky']);
      expect(heard).toContainEqual(['progress', prog.id, 42]);
      expect(heard).toContainEqual(['snoozed', snz.id, expect.stringMatching(/waiting|delayed|active/)]);
    } finally {
      await events.close();
    }
  });

  it('waitUntilReady resolves once the LISTEN is active on the server, and rejects once closed', async () => {
    const events = queues().queueEvents('ev');
    await events.waitUntilReady({ timeoutMs: 20_000 });
    const listening = await t.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %_events%'`,
    );
    expect(listening.rows[0].n).toBeGreaterThan(0);
    await events.close();
    await expect(events.waitUntilReady({ timeoutMs: 1_000 })).rejects.toThrow(/closed before its LISTEN was active/);
  });

  it('a forged NOTIFY on the events channel never reaches a listener; the real event after it does', async () => {
    const events = queues().queueEvents('ev');
    const heard: string[] = [];
    events.on('completed', (job) => heard.push(`completed:${job.id}`));
    events.on('failed', (job) => heard.push(`failed:${job.id}`));
    try {
      // Events committed before the LISTEN is active are not replayed: wait for it, as a user would.
      await events.waitUntilReady({ timeoutMs: 20_000 });
      // A job that is waiting (gated jobs block), one that does not exist, and garbage.
      const waiting = await queues().add('ev', 'gated', { tag: 'forged' }, { delayMs: 3_600_000 });
      const plain = await t.pool.connect();
      try {
        await plain.query(`SELECT pg_notify('pgqueue_events', $1)`, [`completed|ev|${waiting.id}.1`]);
        await plain.query(`SELECT pg_notify('pgqueue_events', $1)`, [`failed|ev|${waiting.id}.0,999999999.1`]);
        await plain.query(`SELECT pg_notify('pgqueue_events', 'completed|ev|nonsense')`);
      } finally {
        plain.release();
      }
      // Positive control: a real completion sent after the forgeries is heard, so they were read and refused.
      const real = await queues().add('ev', 'ok', { n: 1 });
      await waitFor(() => heard.includes(`completed:${real.id}`), { ...WAIT, message: 'the real completion' });
      expect(heard).toEqual([`completed:${real.id}`]);
      await queues().getQueue('ev').remove(waiting.id);
    } finally {
      await events.close();
    }
  });

  it('waitForJob / waitUntilFinished: before and after the end, a failure, a timeout, an unknown id', async () => {
    // Finished before the wait began: the read after subscribing answers it.
    const early = await queues().add('ev', 'ok', { n: 5 });
    await waitFor(async () => (await queues().getJob(early.id))?.state === 'completed', WAIT);
    await expect(early.waitUntilFinished(WAIT)).resolves.toEqual({ doubled: 10 });

    // Finishes while waiting: heard.
    const gated = await queues().add('ev', 'gated', { tag: 'w1' });
    const waiting = queues().waitForJob('ev', gated.id, WAIT);
    await waitFor(() => gates.has('w1'), WAIT);
    gates.get('w1')!();
    await expect(waiting).resolves.toBe('w1');

    // Fails: rejected with the job's last error.
    const boom = await queues().add('ev', 'boom', {});
    const failed = await boom.waitUntilFinished(WAIT).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(JobFinishedWithError);
    expect((failed as JobFinishedWithError).state).toBe('failed');
    expect((failed as JobFinishedWithError).lastError?.message).toBe('the export broke');

    // Not finished in time: a typed timeout; the job goes on.
    const slow = await queues().add('ev', 'gated', { tag: 'w2' }, { delayMs: 3_600_000 });
    const timedOut = await slow.waitUntilFinished({ timeoutMs: 300 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(WaitForJobTimeoutError);
    expect(await queues().getJob(slow.id)).toMatchObject({ state: 'delayed' });

    // A cancelled waiting job (no event is published for it): the periodic read finds it.
    // The handler is attached at once: the wait can settle before cancel() returns (CI, loaded),
    // and a rejection with no handler yet fails the test as unhandled.
    const cancelled = queues()
      .waitForJob('ev', slow.id, WAIT)
      .catch((e: unknown) => e);
    await queues().getQueue('ev').cancel(slow.id);
    const c = await cancelled;
    expect(c).toBeInstanceOf(JobFinishedWithError);
    expect((c as JobFinishedWithError).state).toBe('cancelled');

    await expect(queues().waitForJob('ev', '987654321', WAIT)).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('the async iterator yields events, and a slow consumer is told it lagged instead of growing without bound', async () => {
    const events = queues().queueEvents('ev');
    const it = events.iterate({ bufferSize: 5 });
    try {
      // Events committed before the LISTEN is active are not replayed: wait for it, as a user would.
      await events.waitUntilReady({ timeoutMs: 20_000 });
      const jobs = await queues()
        .getQueue('ev')
        .addBulk(Array.from({ length: 30 }, (_, n) => ({ name: 'ok', payload: { n } })));
      const ids = new Set(jobs.map((j) => j.id));
      // Let all 30 completions arrive without reading them.
      const counted = new Set<string>();
      const counter = queues().queueEvents('ev');
      counter.on('completed', (job: Job) => ids.has(job.id) && counted.add(job.id));
      await waitFor(() => counted.size === 30, { ...WAIT, message: 'all 30 completions heard' });
      await counter.close();
      const seen: QueueEvent[] = [];
      for (;;) {
        const r = await it.next();
        seen.push(r.value as QueueEvent);
        if (seen.filter((e) => e.event === 'completed').length === 5) break;
      }
      const lagged = seen.find((e) => e.event === 'lagged');
      expect(lagged).toBeDefined();
      const lag = lagged!.args[0] as LaggedEvent;
      // 30 completions into a buffer of 5: at least 25 dropped, and they are ours. An event of an
      // earlier test still being confirmed when this one began can add one more (loaded machines).
      expect(lag.missed).toBeGreaterThanOrEqual(25);
      expect(lag.ids.filter((id) => ids.has(id)).length).toBeGreaterThanOrEqual(25 - (lag.missed - 25));
    } finally {
      await events.close();
    }
    // close() ends the iterator.
    await expect(it.next()).resolves.toEqual({ value: undefined, done: true });
  });

  it('hears cancelled, with the error it carries', async () => {
    const events = queues().queueEvents('ev');
    const heard: [string, JobAttemptError][] = [];
    events.on('cancelled', (job, err) => heard.push([job.id, err]));
    try {
      // Events committed before the LISTEN is active are not replayed: wait for it, as a user would.
      await events.waitUntilReady({ timeoutMs: 20_000 });
      const job = await queues().add('ev', 'cancellable', { tag: 'c1' });
      await waitFor(() => gates.has('c1'), WAIT);
      await queues().getQueue('ev').cancel(job.id);
      await waitFor(() => heard.some(([id]) => id === job.id), { ...WAIT, message: 'cancelled heard' });
      expect(heard.find(([id]) => id === job.id)![1]).toMatchObject({ name: 'CancelJobError' });
    } finally {
      await events.close();
    }
  });
});
