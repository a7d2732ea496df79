import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type ActiveJob, type Job } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

/** Each run of a job, in start order; the test ends each one (fail: it throws, as a run whose own write a crash cut). */
const runs: { id: string; attempt: number; end: (fail: boolean) => void }[] = [];

@Processor('forgotten')
class HeldProcessor {
  @Process('held')
  held(job: ActiveJob) {
    return new Promise<void>((resolve, reject) => {
      runs.push({ id: job.id, attempt: job.attempt, end: (fail) => (fail ? reject(new Error('read ECONNRESET')) : resolve()) });
    });
  }
}

/**
 * A claim that a PostgreSQL crash forgot (asyncCommit: true, docs/reliability.md, case 4): the
 * job is back as it was before the claim, while the worker still runs that attempt, and the same
 * worker claims it again with the same attempt number. The forgotten attempt's failure must not
 * land on the new claim. It did before the claim's start was checked: chaos scenario 10 failed so
 * once, three jobs each run once more.
 */
describe('a claim a crash forgot, claimed again by the same worker', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 200 },
      queues: [{ name: 'forgotten', concurrency: 2, defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 0 } } }],
      providers: [HeldProcessor],
    });
  });
  afterAll(() => app?.close());

  it("the forgotten attempt's failure is dropped, not written on the new claim: the job runs twice, not three times", async () => {
    const sup = runtimeOf(app).supervisor;
    const dropped: [string, string][] = [];
    const onDropped = (job: Job, kind: string) => dropped.push([job.id, kind]);
    sup.on('outcomeDropped', onDropped);
    try {
      const job = await app.get(QueueService).add('forgotten', 'held', {});
      await waitFor(() => runs.length === 1, { message: 'the first run to start' });
      // What the crash leaves of a claim it forgot: the row as the claim found it.
      await ctx.pool.query(
        `UPDATE pgqueue.jobs SET state = 'waiting', attempt = attempt - 1, locked_by = NULL, locked_until = NULL, started_at = NULL
         WHERE id = $1`,
        [job.id],
      );
      await ctx.pool.query(`SELECT pg_notify('pgqueue_jobs', 'forgotten|0')`);
      await waitFor(() => runs.length === 2, { message: 'the same worker to claim the job again' });
      expect(runs.map((r) => [r.id, r.attempt])).toEqual([
        [job.id, 1],
        [job.id, 1],
      ]);

      runs[0].end(true);
      await waitFor(() => dropped.length > 0, { message: "the forgotten attempt's retry to be dropped" });
      expect(dropped).toEqual([[job.id, 'retry']]);
      const [row] = (await ctx.pool.query(`SELECT state, attempt, errors FROM pgqueue.jobs WHERE id = $1`, [job.id])).rows;
      expect(row).toEqual({ state: 'active', attempt: 1, errors: [] });

      runs[1].end(false);
      await waitFor(async () => (await app.get(QueueService).getJob(job.id))?.state === 'completed', {
        message: 'the second run to complete the job',
      });
      const done = await app.get(QueueService).getJob(job.id);
      expect(done).toMatchObject({ state: 'completed', attempt: 1, errors: [] });
      expect(runs).toHaveLength(2);
    } finally {
      sup.off('outcomeDropped', onDropped);
    }
  });
});
