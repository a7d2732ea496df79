import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { JobStore } from '../../lib/db/job-store';
import { ClaimWindow } from '../../lib/worker/claim-window';
import { bootApp } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// The claim within a window (issue 13: pick-up while vacuum is held back; lib/worker/claim-window.ts,
// `claimSince` in lib/db/claim.ts). It leaves out jobs older than the window and jobs of a
// priority below any the worker claimed; the catch-up claim (`claimOutside`), due at least once
// a second, takes them, and only them. Nothing here asserts a time: only which jobs each claim takes, and that every job runs.

const ran: string[] = [];

@Processor('flow')
class FlowProcessor {
  @Process()
  any(job: Job) {
    ran.push(job.name);
  }
}

describe('the claim within a window', () => {
  const ctx = useTestDatabase();

  /** A store of its own on a small pool, claiming as 'test-worker' where no handler claims. */
  async function withStore(fn: (store: JobStore) => Promise<void>): Promise<void> {
    const pool = testPool(ctx.db.url, 2);
    try {
      await fn(
        new JobStore(pool, {
          schema: 'pgqueue',
          retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
          asyncCommit: true,
          preparedStatements: false,
        }),
      );
    } finally {
      await pool.end();
    }
  }
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 500, rescueIntervalMs: 60_000 },
      queues: [{ name: 'flow', concurrency: 4 }, { name: 'direct' }],
      providers: [FlowProcessor],
    });
    await app.init();
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    await app?.close();
  });

  it('leaves older and lower-priority jobs to the catch-up claim, which takes them, and nothing inside the window', async () => {
    // Queue 'direct' has no handler in this app, so only this test's store claims from it.
    await withStore(async (store) => {
      const w = new ClaimWindow({ enabled: true, fullEveryMs: 1000, marginMs: 5000 });
      const q = queues.getQueue('direct');
      await q.add('first', {});
      let plan = w.plan(0);
      expect(plan.kind).toBe('full');
      w.sent(plan, 0);
      const first = await store.claim('direct', 10, 'test-worker', 60_000);
      w.answered(
        plan,
        0,
        10,
        first.map((r) => r.priority),
      );
      expect(first.map((r) => r.name)).toEqual(['first']);

      // Added after that short claim: one due a minute ago (as a rolled-back claim or a runAt in
      // the past leaves one), one of a priority no claim has seen, and one like any other.
      await q.add('old', {}, { runAt: new Date(Date.now() - 60_000) });
      await q.add('urgent', {}, { priority: -10 });
      await q.add('new', {});
      plan = w.plan(100);
      expect(plan).toEqual({ kind: 'window', fromPriority: 0, windowMs: 5100 });
      if (plan.kind !== 'window') throw new Error('unreachable');
      w.sent(plan, 100);
      const windowed = await store.claimSince('direct', 10, 'test-worker', 60_000, plan.fromPriority, plan.windowMs);
      w.answered(
        plan,
        100,
        10,
        windowed.map((r) => r.priority),
      );
      expect(windowed.map((r) => r.name)).toEqual(['new']);

      await q.add('newer', {});
      plan = w.plan(1000);
      expect(plan).toEqual({ kind: 'outside', fromPriority: 0, windowMs: 5900 }); // from the short claim at 100
      const outside = await store.claimSince('direct', 10, 'test-worker', 60_000, 0, 5900, 'outside');
      outside.sort((a, b) => a.priority - b.priority || a.run_at_ms - b.run_at_ms);
      expect(outside.map((r) => r.name)).toEqual(['urgent', 'old']);
      const rest = await store.claim('direct', 10, 'test-worker', 60_000);
      expect(rest.map((r) => r.name)).toEqual(['newer']);
    });
  });

  it('a higher priority inside the window is claimed before the rest of it', async () => {
    await withStore(async (store) => {
      const q = queues.getQueue('direct');
      await q.addBulk([
        { name: 'p5-a', payload: {}, opts: { priority: 5 } },
        { name: 'p1', payload: {}, opts: { priority: 1 } },
        { name: 'p5-b', payload: {}, opts: { priority: 5 } },
        { name: 'p0', payload: {}, opts: { priority: 0 } },
      ]);
      const one = await store.claimSince('direct', 1, 'test-worker', 60_000, 0, 60_000);
      const two = await store.claimSince('direct', 2, 'test-worker', 60_000, 0, 60_000);
      const rest = await store.claimSince('direct', 10, 'test-worker', 60_000, 0, 60_000);
      expect([one, two, rest].map((rows) => rows.map((r) => r.name).sort())).toEqual([['p0'], ['p1', 'p5-a'], ['p5-b']]);
    });
  });

  it('a running worker still runs every job outside its window, while other jobs keep it claiming within it', async () => {
    const q = queues.getQueue('flow');
    // A steady trickle keeps the worker claiming (and its window on) while the others go in.
    let trickling = true;
    let n = 0;
    const trickle = (async () => {
      while (trickling) {
        await q.add('tick', { n: n++ });
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    try {
      await waitFor(() => ran.filter((x) => x === 'tick').length >= 20, {
        timeoutMs: 20_000,
        message: 'the first 20 ticks to run',
      });
      await q.add('old', {}, { runAt: new Date(Date.now() - 60_000) });
      await q.add('urgent', {}, { priority: -10 });
      await waitFor(() => ran.includes('old') && ran.includes('urgent'), {
        timeoutMs: 20_000,
        message: () => `the jobs outside the window to run; ran ${ran.length} jobs, none of them 'old' or 'urgent'`,
      });
    } finally {
      trickling = false;
      await trickle;
    }
    await waitFor(async () => (await q.getCounts()).waiting === 0, { timeoutMs: 20_000, message: 'the queue to drain' });
  });
});
