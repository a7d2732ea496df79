import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

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
});
