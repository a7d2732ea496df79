import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// The job a handler receives is built from the claim's row, which leaves out what the worker
// knows or what is usually empty (the queue, an empty error list, a cancel not asked: see the
// claim in lib/db/claim.ts). The handler still sees every field as stored.

const seen: { attempt: number; queue: string; errors: unknown; json: Record<string, unknown> }[] = [];

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
      queues: [{ name: 'fields', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 0 } } }],
      providers: [FieldsProcessor],
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
});
