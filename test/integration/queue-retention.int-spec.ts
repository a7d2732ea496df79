import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueConfigError, Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// registerQueue({ retention }) over the module's (issue 27 point 3): rows of a queue that keeps
// history shorter than the others are deleted in batches by maintenance; a queue that keeps it
// longer keeps the partitions longer, and the other queues' rows in them are deleted in batches.

const D = 86_400_000;

@Processor('kept')
class KeptProcessor {
  @Process()
  run(job: Job) {
    return job.id;
  }
}

@Processor('plain')
class PlainProcessor {
  @Process()
  run(job: Job) {
    return job.id;
  }
}

describe('retention per queue', () => {
  const t = useTestDatabase();

  async function finished(schema: string, id: number, queue: string, state: string, agoMs: number): Promise<void> {
    await t.pool.query(
      `INSERT INTO ${schema}.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
       VALUES ($1, $2, 'x', '{}', $3, 0, now(), 1, 1, '[]', now(), now() - $4::float8 * interval '1 millisecond')`,
      [id, queue, state, agoMs],
    );
  }
  const ids = async (schema: string) =>
    (await t.pool.query(`SELECT id::int FROM ${schema}.job_history ORDER BY id`)).rows.map((r) => r.id);
  const pass = async (app: INestApplicationContext) => {
    let pruned = 0;
    await waitFor(
      async () => {
        const r = await runtimeOf(app).store.maintain(1000);
        if (r) pruned = r.pruned;
        return r !== null;
      },
      { message: 'a maintenance pass on this node' },
    );
    return pruned;
  };

  it('a shorter and a longer retention than the module’s: each queue’s rows go at their own age', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'per_queue', retention: { completedMs: D, cancelledMs: D }, workers: false },
      queues: [
        { name: 'short', retention: { completedMs: 60_000, failedMs: 60_000 } },
        { name: 'long', retention: { completedMs: 30 * D } },
        { name: 'plain' },
      ],
    });
    try {
      const store = runtimeOf(app).store;
      // Partitions are kept as long as the longest retention of the database.
      expect(store.retentions.dropAfterMs).toBe(30 * D);
      await finished('per_queue', 1, 'short', 'completed', 120_000); // past 1 min: goes
      await finished('per_queue', 2, 'short', 'completed', 1_000); // kept
      await finished('per_queue', 3, 'short', 'failed', 120_000); // its own failedMs: goes
      await finished('per_queue', 4, 'plain', 'completed', 2 * D); // past the module's day: goes (row by row)
      await finished('per_queue', 5, 'plain', 'cancelled', 2 * D); // the same
      await finished('per_queue', 6, 'plain', 'completed', 3_600_000); // kept
      await finished('per_queue', 7, 'plain', 'failed', 365 * D); // failed kept for ever (module)
      await finished('per_queue', 8, 'long', 'completed', 2 * D); // kept: 30 days
      await finished('per_queue', 9, 'long', 'completed', 40 * D); // past 30 days (default partition): goes
      await finished('per_queue', 10, 'long', 'cancelled', 2 * D); // its cancelledMs is the module's day: goes
      // One batch per class and table per pass: a few passes empty everything that is due.
      let total = 0;
      for (let i = 0; i < 3; i++) total += await pass(app);
      expect(total).toBe(6);
      expect(await ids('per_queue')).toEqual([2, 6, 7, 8]);
    } finally {
      await app.close();
    }
  });

  it('a queue that keeps completed jobs when the module keeps none: its jobs go to history, the others’ are deleted by maintenance', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'per_queue_zero', retention: { completedMs: 0 }, pollIntervalMs: 100 },
      queues: [{ name: 'kept', retention: { completedMs: D } }, { name: 'plain' }],
      providers: [KeptProcessor, PlainProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const kept = await queues.add('kept', 'x', {});
      const plain = await queues.add('plain', 'x', {});
      await waitFor(async () => (await t.pool.query('SELECT count(*)::int AS n FROM per_queue_zero.jobs')).rows[0].n === 0, {
        message: 'both jobs to complete',
      });
      await waitFor(async () => (await queues.getJob(plain.id)) === null, {
        message: 'the plain job to be pruned',
        timeoutMs: 20_000,
      });
      expect((await queues.getJob(kept.id))?.state).toBe('completed');
    } finally {
      await app.close();
    }
  });

  it('bad values fail at boot, naming the queue and the option', async () => {
    const cases: [unknown, RegExp][] = [
      [{ completedMs: -1 }, /queue "q" retention\.completedMs/],
      [{ failedMs: 1.5 }, /queue "q" retention\.failedMs/],
      [{ completedMs: 1000, age: 5 }, /Unknown option.*age/],
      ['1 day', /Invalid queue "q" retention/],
    ];
    for (const [retention, msg] of cases) {
      const boot = bootApp({
        options: { connection: t.db.url, schema: 'per_queue_bad', workers: false },
        queues: [{ name: 'q', retention: retention as never }],
      });
      await expect(boot).rejects.toThrow(msg);
      await expect(boot).rejects.toBeInstanceOf(PgQueueConfigError);
    }
  });
});
