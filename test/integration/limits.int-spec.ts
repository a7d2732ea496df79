import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// globalConcurrency holds across two nodes; the limiter's sliding window holds for every window.

let running = 0;
let maxRunning = 0;
const ranOn = new Map<string, string>();

function processorFor(node: string) {
  @Processor('gc')
  class GcProcessor {
    @Process()
    async run(job: Job) {
      running++;
      maxRunning = Math.max(maxRunning, running);
      ranOn.set(job.id, node);
      await sleep(100);
      running--;
    }
  }
  return GcProcessor;
}

@Processor('rl')
class RlProcessor {
  @Process()
  run() {
    return undefined;
  }
}

describe('global limits', () => {
  const t = useTestDatabase();

  it('globalConcurrency 3 holds across two nodes with 5 slots each', async () => {
    const options = { connection: t.db.url, pollIntervalMs: 100 };
    const queues = [{ name: 'gc', concurrency: 5, globalConcurrency: 3 }];
    const a: INestApplicationContext = await bootApp({ options, queues, providers: [processorFor('a')] });
    const b: INestApplicationContext = await bootApp({ options, queues, providers: [processorFor('b')] });
    try {
      const jobs = await a.get(QueueService).addBulk(
        'gc',
        Array.from({ length: 24 }, (_, i) => ({ name: 'x', payload: { i } })),
      );
      await waitFor(
        async () =>
          (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE state = 'completed'`)).rows[0].n === 24,
        {
          timeoutMs: 20_000,
          message: 'all 24 jobs to complete',
        },
      );
      expect(jobs.every((j) => ranOn.has(j.id))).toBe(true);
      expect(maxRunning).toBeLessThanOrEqual(3);
      expect(maxRunning).toBeGreaterThanOrEqual(2); // the limit, not a stall, kept it low
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('limiter { max: 4, durationMs: 1000 }: no 1-second window holds more than 4 starts', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'rl', concurrency: 10, limiter: { max: 4, durationMs: 1000 } }],
      providers: [RlProcessor],
    });
    try {
      await app.get(QueueService).addBulk(
        'rl',
        Array.from({ length: 12 }, (_, i) => ({ name: 'x', payload: { i } })),
      );
      const history = `SELECT extract(epoch FROM started_at)::float8 * 1000 AS started FROM pgqueue.job_history WHERE queue = 'rl' AND state = 'completed' ORDER BY started_at`;
      await waitFor(async () => (await t.pool.query(history)).rowCount === 12, {
        timeoutMs: 15_000,
        message: 'twelve completed jobs',
      });
      // The start times the database stamped on the jobs (not handler clocks, which a stalled
      // event loop skews): no window of 1000 ms holds more than 4.
      const starts = (await t.pool.query(history)).rows.map((r) => Number(r.started));
      const crowded = starts
        .map((s) => ({ from: s, starts: starts.filter((x) => x >= s && x < s + 1000).length }))
        .filter((w) => w.starts > 4);
      expect(crowded).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('refuses limits that make no sense, saying what to pass', async () => {
    await expect(bootApp({ options: { connection: t.db.url }, queues: [{ name: 'bad', globalConcurrency: 0 }] })).rejects.toThrow(
      /globalConcurrency/,
    );
    await expect(
      bootApp({ options: { connection: t.db.url }, queues: [{ name: 'bad', limiter: { max: 5 } as never }] }),
    ).rejects.toThrow(/max and durationMs/);
  });
});
