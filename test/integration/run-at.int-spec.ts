import 'reflect-metadata';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

const ran = new Set<string>();

@Processor('at')
class AtProcessor {
  @Process()
  run(job: Job) {
    ran.add(job.id);
  }
}

describe('runAt', () => {
  const t = useTestDatabase();

  it('a job enqueued with runAt runs at that time, not before (by the database clock)', async () => {
    // A 60 s poll: the job starts on time only by the timer its NOTIFY sets.
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 60_000 },
      queues: [{ name: 'at' }],
      providers: [AtProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const [{ now }] = (await t.pool.query<{ now: Date }>('SELECT now()')).rows;
      // 5 s ahead: on a loaded machine the insert below must still come before runAt.
      const runAt = new Date(now.getTime() + 5000);
      const job = await queues.add('at', 'x', {}, { runAt });
      expect(job.state).toBe('delayed');
      expect(job.runAt.getTime()).toBe(runAt.getTime());
      // A job due now wakes the worker while the first is not due: its claim must leave that one.
      const now2 = await queues.add('at', 'x', {});
      await waitFor(async () => (await queues.getJob(now2.id))?.state === 'completed', {
        timeoutMs: 15_000,
        message: 'the job due now to run',
      });
      await waitFor(async () => (await queues.getJob(job.id))?.state === 'completed', {
        timeoutMs: 30_000,
        message: 'the job to run',
      });
      expect(ran.has(job.id)).toBe(true);
      const { rows } = await t.pool.query<{ run_at: Date; started_at: Date }>(
        'SELECT run_at, started_at FROM pgqueue.job_history WHERE id = $1',
        [job.id],
      );
      expect(rows[0].run_at.getTime()).toBe(runAt.getTime());
      // started_at is the claim's now(): the claim took the job only once its time had come.
      expect(rows[0].started_at.getTime()).toBeGreaterThanOrEqual(runAt.getTime());
    } finally {
      await app.close();
    }
  }, 60_000);
});
