import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { OnWorkerEvent, Process, Processor, QueueService, type Job, type JobAttemptError, type StalledJob } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

const seen: string[] = [];

@Processor('ev')
class EvProcessor {
  @Process()
  run(job: Job<{ fail?: boolean }>) {
    if (job.payload.fail) throw new Error('nope');
    return 'fine';
  }
}

@Injectable()
class Listeners {
  @OnWorkerEvent('active')
  active(job: Job) {
    seen.push(`active:${job.id}`);
  }
  @OnWorkerEvent('completed', { queue: 'ev' })
  completed(job: Job, result: unknown) {
    seen.push(`completed:${job.id}:${String(result)}`);
  }
  @OnWorkerEvent('retrying')
  retrying(job: Job, error: JobAttemptError, delayMs: number) {
    seen.push(`retrying:${job.id}:${error.message}:${delayMs >= 0}`);
  }
  @OnWorkerEvent('failed')
  failed(job: Job, error: JobAttemptError) {
    seen.push(`failed:${job.id}:${error.message}`);
    throw new Error('a broken listener must not hurt the job');
  }
  @OnWorkerEvent('stalled')
  stalled(job: StalledJob) {
    seen.push(`stalled:${job.id}:${job.willRetry}`);
  }
  @OnWorkerEvent('completed', { queue: 'other' })
  otherQueueOnly(job: Job) {
    seen.push(`other:${job.id}`);
  }
}

describe('counts and lifecycle events', () => {
  const t = useTestDatabase();

  it('getCounts reports waiting, delayed, active, stalled, failed and the oldest waiting age in one query', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, workers: false, schema: 'counts' },
      queues: [{ name: 'c1' }, { name: 'empty' }],
    });
    try {
      const queues = app.get(QueueService);
      await queues.addBulk(
        'c1',
        [1, 2, 3].map((i) => ({ name: 'x', payload: { i } })),
      );
      await queues.add('c1', 'x', {}, { delayMs: 60_000 });
      await t.pool.query(`UPDATE counts.jobs SET run_at = now() - interval '5 seconds' WHERE id = 1`);
      await t.pool.query(
        `UPDATE counts.jobs SET state = 'active', locked_by = 'w', locked_until = now() - interval '1 second' WHERE id = 2`,
      );
      await t.pool.query(
        `INSERT INTO counts.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at)
         VALUES (100, 'c1', 'x', '{}', 'failed', 0, now(), 3, 3, '[]', now()), (101, 'c1', 'x', '{}', 'completed', 0, now(), 1, 3, '[]', now())`,
      );
      const c1 = await queues.getQueue('c1').getCounts();
      expect(c1).toMatchObject({ waiting: 2, delayed: 1, active: 1, stalled: 1, failed: 1 });
      expect(c1.oldestWaitingAgeMs).toBeGreaterThanOrEqual(4000);
      const all = await queues.getCounts();
      expect(all.empty).toEqual({
        waiting: 0,
        delayed: 0,
        active: 0,
        stalled: 0,
        failed: 0,
        waitingChildren: 0,
        sleeping: 0,
        waitingSignal: 0,
        oldestWaitingAgeMs: null,
      });
      expect(all.c1).toMatchObject({ waiting: 2, delayed: 1, active: 1, stalled: 1, failed: 1 });
    } finally {
      await app.close();
    }
  });

  it('@OnWorkerEvent methods hear active, completed, retrying, failed and stalled, filtered by queue', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'events', rescueIntervalMs: 100, pollIntervalMs: 100 },
      queues: [{ name: 'ev', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10 } } }, { name: 'other' }],
      providers: [EvProcessor, Listeners],
    });
    try {
      const queues = app.get(QueueService);
      const ok = await queues.add('ev', 'x', {});
      const bad = await queues.add('ev', 'x', { fail: true }, { attempts: 2 });
      await waitFor(() => seen.includes(`completed:${ok.id}:fine`) && seen.includes(`failed:${bad.id}:nope`), {
        message: 'events',
      });
      expect(seen).toContain(`active:${ok.id}`);
      expect(seen).toContain(`retrying:${bad.id}:nope:true`);
      expect(seen.filter((s) => s.startsWith('other:'))).toEqual([]);
      // A dead worker's job: the rescuer reports it.
      const { rows } = await t.pool.query(
        `INSERT INTO events.jobs (queue, name, payload, state, attempt, max_attempts, locked_by, locked_until)
         VALUES ('ev', 'x', '{}', 'active', 1, 1, 'dead', now() - interval '1 second') RETURNING id`,
      );
      await waitFor(() => seen.includes(`stalled:${rows[0].id}:false`), { message: 'stalled event' });
      expect((await queues.getJob(bad.id))?.state).toBe('failed'); // the throwing listener changed nothing
    } finally {
      await app.close();
    }
  });
});
