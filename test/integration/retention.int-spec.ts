import 'reflect-metadata';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

const ran: string[] = [];

@Processor('keep')
class KeepProcessor {
  @Process()
  run(job: Job<{ poison?: boolean }>) {
    ran.push(job.id);
    if (job.payload.poison) throw new Error('poison');
    return 'ok';
  }
}

describe('retention of finished jobs', () => {
  const t = useTestDatabase();

  it('retention.completedMs = 0 deletes completed jobs at once and keeps failed ones', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'no_history', retention: { completedMs: 0 }, pollIntervalMs: 100 },
      queues: [{ name: 'keep' }],
      providers: [KeepProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const jobs = await queues.addBulk(
        'keep',
        Array.from({ length: 50 }, (_, i) => ({ name: 'x', payload: { i } })),
      );
      const failing = await queues.add('keep', 'x', { poison: true }, { attempts: 1 });
      await waitFor(async () => (await t.pool.query('SELECT count(*)::int AS n FROM no_history.jobs')).rows[0].n === 0, {
        message: 'live table to empty',
      });
      expect(jobs.every((j) => ran.includes(j.id))).toBe(true);
      expect(await queues.getJob(jobs[0].id)).toBeNull();
      await waitFor(async () => (await queues.getJob(failing.id))?.state === 'failed');
      const history = await t.pool.query('SELECT id::text, state FROM no_history.job_history');
      expect(history.rows).toEqual([{ id: failing.id, state: 'failed' }]);
    } finally {
      await app.close();
    }
  });

  it('completed jobs past retention are pruned by the maintenance pass; failed ones stay', async () => {
    const app = await bootApp({
      options: {
        connection: t.db.url,
        schema: 'short_history',
        retention: { completedMs: 1000 },
        rescueIntervalMs: 200,
        pollIntervalMs: 100,
      },
      queues: [{ name: 'keep' }],
      providers: [KeepProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const done = await queues.add('keep', 'x', {});
      await waitFor(async () => (await queues.getJob(done.id))?.state === 'completed');
      await t.pool.query(
        `INSERT INTO short_history.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
         VALUES (999999, 'keep', 'x', '{}', 'failed', 0, now(), 3, 3, '[]', now(), now() - interval '1 year')`,
      );
      await waitFor(async () => (await queues.getJob(done.id)) === null, {
        timeoutMs: 10_000,
        message: 'completed job to be pruned',
      });
      expect((await queues.getJob('999999'))?.state).toBe('failed');
    } finally {
      await app.close();
    }
  });
  it('retention.failedMs prunes failed jobs past it, and leaves completed ones to their own retention', async () => {
    const app = await bootApp({
      options: {
        connection: t.db.url,
        schema: 'failed_pruned',
        retention: { failedMs: 500 },
        rescueIntervalMs: 200,
        pollIntervalMs: 100,
      },
      queues: [{ name: 'keep' }],
      providers: [KeepProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const kept = await queues.add('keep', 'x', {});
      const failing = await queues.add('keep', 'x', { poison: true }, { attempts: 1 });
      // Seen failed first, so the deletion below is the prune, not a job that never finished.
      await waitFor(async () => (await queues.getJob(failing.id))?.state === 'failed', { message: 'the poison job to fail' });
      await waitFor(async () => (await queues.getJob(failing.id)) === null, {
        timeoutMs: 10_000,
        message: 'the failed job to be pruned',
      });
      // The same prune statement ran over the completed job: the default day of retention keeps it.
      expect((await queues.getJob(kept.id))?.state).toBe('completed');
    } finally {
      await app.close();
    }
  });
});
