import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Registry } from 'prom-client';
import { Process, Processor, QueueService, type ActiveJob, type Queue } from '../../lib';
import { PgQueueMetricsModule } from '../../lib/metrics';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Parked jobs as states of their own (issue 31): a job parked by job.sleep() counts as
// `sleeping`, one parked by job.waitFor() as `waitingSignal`, in getCounts(), QueueService's, and
// the metrics gauge, and no longer as delayed; getJobCounts(['delayed']) keeps them (it counts
// what getJobs(['delayed']) lists, as in BullMQ). A signalled wait leaves the parked count. Each
// park publishes a `parked` queue event (its own test: events need LISTEN).

@Processor('parks')
class ParksProcessor {
  @Process()
  async run(job: ActiveJob<{ mode: 'sleep' | 'wait' }>) {
    if (job.payload.mode === 'sleep') await job.sleep('nap', 24 * 3_600_000);
    else await job.waitFor('approved');
    return 'resumed';
  }
}

describe('parked jobs in counts and metrics', () => {
  const t = useTestDatabase();
  const registry = new Registry();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'parks', concurrency: 4 }],
      providers: [ParksProcessor],
      imports: [PgQueueMetricsModule.register({ registry })],
    });
    queue = app.get(QueueService).getQueue('parks');
  });
  afterAll(async () => {
    await app?.close();
  });

  it('counts sleeping and waiting-signal jobs apart from delayed, everywhere', async () => {
    const sleepers = await Promise.all([1, 2].map(() => queue.add('x', { mode: 'sleep' })));
    const waiter = await queue.add('x', { mode: 'wait' });
    await queue.add('x', { mode: 'sleep' }, { delayMs: 3_600_000 }); // a plain delayed job
    await waitFor(async () => {
      const c = await queue.getCounts();
      return c.sleeping === 2 && c.waitingSignal === 1;
    });
    expect(await queue.getCounts()).toMatchObject({ waiting: 0, delayed: 1, active: 0, sleeping: 2, waitingSignal: 1 });
    expect((await app.get(QueueService).getCounts()).parks).toMatchObject({ delayed: 1, sleeping: 2, waitingSignal: 1 });
    expect(await queue.getJobCounts('delayed')).toEqual({ delayed: 4 });
    for (const j of sleepers) expect((await queue.getJob(j.id))?.state).toBe('delayed');

    const text = await registry.metrics();
    expect(text).toContain('pgqueue_queue_jobs{queue="parks",state="delayed"} 1');
    expect(text).toContain('pgqueue_queue_jobs{queue="parks",state="sleeping"} 2');
    expect(text).toContain('pgqueue_queue_jobs{queue="parks",state="waiting-signal"} 1');

    // Signalled, the waiter is due, runs, and completes: out of the parked count.
    expect(await queue.signal(waiter.id, 'approved', { ok: true })).toBe(true);
    await waitFor(async () => (await queue.getJob(waiter.id))?.state === 'completed');
    expect(await queue.getCounts()).toMatchObject({ delayed: 1, sleeping: 2, waitingSignal: 0 });
  });

  // Queue events need LISTEN: left out of the poll-only run through PgBouncer (test/pgbouncer/suite.js).
  it('publishes a parked queue event per park, confirmed against the row', async () => {
    const events = app.get(QueueService).queueEvents('parks');
    const parked: string[] = [];
    events.on('parked', (job) => parked.push(job.id));
    await events.waitUntilReady({ timeoutMs: 20_000 });
    const jobs = [await queue.add('x', { mode: 'sleep' }), await queue.add('x', { mode: 'wait' })];
    await waitFor(() => parked.length === 2, { message: 'two parked events' });
    expect([...parked].sort()).toEqual(jobs.map((j) => j.id).sort());
    await events.close();
  });
});
