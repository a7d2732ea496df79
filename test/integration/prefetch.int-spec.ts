import 'reflect-metadata';
import { Client } from 'pg';
import { Process, Processor, QueueService, type ActiveJob } from '../../lib';
import { bootApp } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

const done = new Set<string>();
let releaseLong: () => void = () => undefined;

@Processor('pf')
class PrefetchProcessor {
  @Process('fast')
  fast(job: ActiveJob<{ tag: string }>) {
    done.add(job.payload.tag);
  }

  @Process('long')
  long(job: ActiveJob<{ tag: string }>) {
    return new Promise<void>((resolve) => {
      releaseLong = () => {
        done.add(job.payload.tag);
        resolve();
      };
    });
  }
}

describe('prefetch never strands jobs behind a long one', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('buffered jobs go back to the queue when the only slot is busy, and another worker runs them', async () => {
    const boot = () =>
      bootApp({
        options: { connection: db.url, pollIntervalMs: 200 },
        queues: [{ name: 'pf', concurrency: 1 }],
        providers: [PrefetchProcessor],
      });
    const a = await boot();
    let b: Awaited<ReturnType<typeof boot>> | undefined;
    try {
      const queues = a.get(QueueService);
      // Fast jobs first: worker A learns its handlers are fast and starts prefetching.
      await queues.addBulk(
        'pf',
        Array.from({ length: 30 }, (_, i) => ({ name: 'fast', payload: { tag: `warm${i}` } })),
      );
      await waitFor(() => done.size === 30, { message: 'warm-up jobs' });
      // Then a long job ahead of four fast ones: A runs the long one and buffers the rest.
      await queues.addBulk('pf', [
        { name: 'long', payload: { tag: 'long' } },
        ...[1, 2, 3, 4].map((i) => ({ name: 'fast', payload: { tag: `after${i}` } })),
      ]);
      // All five are A's: the long one running, four prefetched.
      const c = new Client({ connectionString: db.url });
      await c.connect();
      await waitFor(
        async () => (await c.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE state = 'active'`)).rows[0].n === 5,
        {
          message: 'A to hold the long job and four prefetched ones',
        },
      );
      await c.end();
      b = await boot();
      // B can only get them if A hands its buffer back while its slot is still taken.
      await waitFor(() => [1, 2, 3, 4].every((i) => done.has(`after${i}`)), {
        timeoutMs: 10_000,
        message: 'buffered jobs to run elsewhere',
      });
      expect(done.has('long')).toBe(false);
      releaseLong();
      await waitFor(() => done.has('long'));
    } finally {
      releaseLong();
      await b?.close();
      await a.close();
    }
  });
});
