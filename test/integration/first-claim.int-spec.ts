import 'reflect-metadata';
import { Process, Processor, QueueService, type ActiveJob } from '../../lib';
import { JobStore } from '../../lib/db/job-store';
import { bootApp } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

// A worker's first claim waits for its one read of the stored limits (supervisor.ts, issue 30):
// on a queue with no limit stored it is the fast claim, never the limited path (a transaction of
// four statements under the queue's lock, claiming only `concurrency` jobs, never prefetching).
// The counter wraps JobStore's own method; every statement still runs on the real database.

const done = new Set<number>();

@Processor('first')
class FirstProcessor {
  @Process()
  run(job: ActiveJob<{ i: number }>) {
    done.add(job.payload.i);
  }
}

describe('the first claim of a worker', () => {
  let db: TestDatabase;
  const limited = JobStore.prototype.claimLimited;
  let limitedCalls = 0;
  beforeAll(async () => {
    db = await createTestDatabase();
    JobStore.prototype.claimLimited = function (this: JobStore, ...args: Parameters<JobStore['claimLimited']>) {
      limitedCalls++;
      return limited.apply(this, args);
    };
  });
  afterAll(async () => {
    JobStore.prototype.claimLimited = limited;
    await db?.drop();
  });

  it('on a queue with no limit stored, takes the fast path from the start, a backlog waiting', async () => {
    // The backlog is in place before the worker's node boots: its first claim finds it.
    const producer = await bootApp({ options: { connection: db.url, workers: false }, queues: [{ name: 'first' }] });
    try {
      await producer.get(QueueService).addBulk(
        'first',
        Array.from({ length: 50 }, (_, i) => ({ name: 'x', payload: { i } })),
      );
    } finally {
      await producer.close();
    }
    const worker = await bootApp({
      options: { connection: db.url },
      queues: [{ name: 'first', concurrency: 5 }],
      providers: [FirstProcessor],
    });
    try {
      await waitFor(() => done.size === 50, { message: 'every job of the backlog ran' });
      expect(limitedCalls).toBe(0);
    } finally {
      await worker.close();
    }
  });
});
