import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';
import { TcpProxy } from '../support/tcp-proxy';

@Processor('later')
class LaterProcessor {
  @Process()
  handle() {}
}

// Each delayed job starts at its own due time, not at the next poll. The poll is five minutes
// here, so within the test's deadlines only the worker's wake-up timer can start a delayed job.
// The worker keeps one timer, for the earliest due time it knows: a second delayed job, due
// later than the one already on the timer, used to wait for the poll.
describe('delayed jobs start at their own due time, with one timer and no poll', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 300_000 },
      queues: [{ name: 'later', concurrency: 5 }],
      providers: [LaterProcessor],
    });
    await app.init();
    queues = app.get(QueueService);
    // A NOTIFY sent before the listener is up would be missed, and only the poll would find the job.
    await waitFor(() => runtimeOf(app).supervisor.listenerState?.connected === true, { message: 'listener to connect' });
  });

  afterAll(async () => {
    await app?.close();
  });

  /** Waits for the job's completion and checks it started no earlier than its run_at (both by the database clock). */
  async function startedOnTime(id: string): Promise<void> {
    let job: Job | null = null;
    await waitFor(
      async () => {
        job = await queues.getJob(id);
        return job?.state === 'completed';
      },
      // Far below the 5 min poll; generous for a loaded machine.
      {
        timeoutMs: 20_000,
        message: async () => `delayed job ${id} to run without a poll; now ${JSON.stringify(await queues.getJob(id))}`,
      },
    );
    expect(job!.startedAt!.getTime()).toBeGreaterThanOrEqual(job!.runAt.getTime());
  }

  it('two jobs enqueued one after the other, the second due later, both run', async () => {
    const first = await queues.add('later', 'a', {}, { delayMs: 300 });
    const second = await queues.add('later', 'b', {}, { delayMs: 900 });
    await startedOnTime(first.id);
    await startedOnTime(second.id);
  });

  it('jobs of one addBulk due at different times (one NOTIFY, for the earliest) all run', async () => {
    const jobs = await queues.addBulk('later', [
      { name: 'c', payload: {}, opts: { delayMs: 300 } },
      { name: 'd', payload: {}, opts: { delayMs: 700, priority: 5 } },
      { name: 'e', payload: {}, opts: { delayMs: 1100, priority: -5 } },
    ]);
    for (const j of jobs) await startedOnTime(j.id);
  });

  it('a delayed job whose NOTIFY was missed (the listener was down) starts at its due time once the listener is back', async () => {
    // The listener goes through a proxy that is down when the job is enqueued, so its NOTIFY is
    // lost; the catch-up claim when the listener connects must look up the next due time, as the
    // poll does. It used to claim only what was due, and the job waited for the 5 min poll.
    const proxy = await TcpProxy.forUrl(ctx.db.url);
    await proxy.stop();
    const other = await bootApp({
      options: {
        connection: ctx.db.url,
        listenConnection: proxy.urlThrough(ctx.db.url),
        pollIntervalMs: 300_000,
        schema: 'pgqueue_missed',
      },
      queues: [{ name: 'later', concurrency: 5 }],
      providers: [LaterProcessor],
    });
    try {
      await other.init();
      const q = other.get(QueueService);
      const state = () => runtimeOf(other).supervisor.listenerState;
      await waitFor(() => state()?.scheduledReconnect != null, { message: 'the listener to fail and schedule a reconnect' });
      // The first claim (at start) has come back, so only a later wake-up can find the job.
      await waitFor(() => runtimeOf(other).supervisor.claimsAnswered('later') > 0, { message: 'the first claim to be answered' });
      const job = await q.add('later', 'missed', {}, { delayMs: 1500 });
      await proxy.start();
      await waitFor(() => state()?.connected === true, { timeoutMs: 20_000, message: 'the listener to connect' });
      let seen: Job | null = null;
      await waitFor(
        async () => {
          seen = await q.getJob(job.id);
          return seen?.state === 'completed';
        },
        {
          timeoutMs: 20_000,
          message: async () => `the job to run without a poll; now ${JSON.stringify(await q.getJob(job.id))}`,
        },
      );
      expect(seen!.startedAt!.getTime()).toBeGreaterThanOrEqual(seen!.runAt.getTime());
    } finally {
      await other.close();
      await proxy.stop();
    }
  }, 60_000);
});
