import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// The job a handler receives is built from the claim's row, which leaves out what the worker
// knows or what is usually empty (the queue, an empty error list, a cancel not asked: see the
// claim in lib/db/claim.ts). The handler still sees every field as stored.

const seen: { attempt: number; queue: string; errors: unknown; json: Record<string, unknown> }[] = [];
const times = new Map<string, { createdAt: number; runAt: number; startedAt: number | null }>();

@Processor('times')
class TimesProcessor {
  @Process()
  run(job: Job) {
    times.set(job.id, {
      createdAt: job.createdAt.getTime(),
      runAt: job.runAt.getTime(),
      startedAt: job.startedAt?.getTime() ?? null,
    });
  }
}

@Processor('fields')
class FieldsProcessor {
  @Process()
  run(job: Job<{ n: number }>) {
    seen.push({ attempt: job.attempt, queue: job.queue, errors: job.errors, json: JSON.parse(JSON.stringify(job)) });
    if (job.attempt === 1) throw new Error('first attempt fails');
    return job.payload.n;
  }
}

describe('the claimed job', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 200 },
      queues: [{ name: 'fields', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 0 } } }, { name: 'times' }],
      providers: [FieldsProcessor, TimesProcessor],
    });
    await app.init();
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    await app?.close();
  });

  it('carries its queue, no errors on a first attempt, and the earlier attempts’ errors on a retry', async () => {
    const added = await queues.add('fields', 'sum', { n: 7 });
    await waitFor(async () => (await queues.getJob(added.id))?.state === 'completed', {
      message: () => `job completed; seen ${JSON.stringify(seen)}`,
    });
    expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    expect(seen[0]).toMatchObject({ queue: 'fields', errors: [] });
    expect(seen[1].queue).toBe('fields');
    expect(seen[1].errors).toEqual([expect.objectContaining({ attempt: 1, message: 'first attempt fails' })]);
    expect(seen[0].json).toMatchObject({ id: added.id, queue: 'fields', name: 'sum', payload: { n: 7 }, errors: [], attempt: 1 });
    expect((await queues.getJob(added.id))?.result).toBe(7);
  });

  // The claim sends created_at only when it differs from run_at (lib/db/claim.ts): a job added to
  // run at once and a delayed one must both show the stored times.
  it('shows the stored created, run and start times, for a job due at once and a delayed one', async () => {
    const now = await queues.add('times', 'now', {});
    const later = await queues.add('times', 'later', {}, { delayMs: 300 });
    await waitFor(() => times.has(now.id) && times.has(later.id), {
      message: () => `handlers saw ${[...times.keys()].join(', ')}`,
    });
    const { rows } = await ctx.pool.query<{ id: string; created: number; run: number; started: number }>(
      `SELECT id::text, extract(epoch FROM created_at) * 1000 AS created, extract(epoch FROM run_at) * 1000 AS run,
              extract(epoch FROM started_at) * 1000 AS started
       FROM pgqueue.job_history WHERE id = ANY($1::bigint[])`,
      [[now.id, later.id]],
    );
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      const seenTimes = times.get(r.id)!;
      // Stored with microseconds; a Date holds milliseconds.
      expect(Math.abs(seenTimes.createdAt - Number(r.created))).toBeLessThan(1);
      expect(Math.abs(seenTimes.runAt - Number(r.run))).toBeLessThan(1);
      expect(Math.abs(seenTimes.startedAt! - Number(r.started))).toBeLessThan(1);
    }
    const delayed = times.get(later.id)!;
    expect(delayed.runAt - delayed.createdAt).toBeGreaterThanOrEqual(299);
    expect(times.get(now.id)!.runAt).toBe(times.get(now.id)!.createdAt);
  });
});
