import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  DependencyError,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type ChildResult,
  type FlowNode,
  type Job,
} from '../../lib';
import { DataSource } from 'typeorm';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Flows and dependencies in one process: a parent runs once its children have finished, with
// their results; failure policies; dependsOn on existing jobs; cancel and remove of either side;
// the release guard against a child that ends twice (a retried one). Every check reads the
// database or the handlers' own record of what ran.

interface Step {
  fail?: boolean;
  value?: unknown;
  gate?: string;
}

const runs: { id: string; queue: string; name: string; attempt: number; children?: ChildResult[] }[] = [];
// Handlers that hold at a gate until the test opens it (before or after they reach it).
const gates = new Map<string, { promise: Promise<void>; open: () => void }>();
const reached = new Set<string>();

function gate(key: string): { promise: Promise<void>; open: () => void } {
  let g = gates.get(key);
  if (!g) {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    gates.set(key, (g = { promise, open }));
  }
  return g;
}

async function step(job: ActiveJob<Step>): Promise<unknown> {
  const children = await job.childResults();
  runs.push({ id: job.id, queue: job.queue, name: job.name, attempt: job.attempt, children });
  if (job.payload?.gate) {
    reached.add(job.payload.gate);
    await gate(job.payload.gate).promise;
  }
  if (job.payload?.fail) throw new Error(`step ${job.id} fails`);
  return job.payload?.value ?? { ran: job.id };
}

@Processor('orders')
class OrdersProcessor {
  @Process()
  run(job: ActiveJob<Step>) {
    return step(job);
  }
}

@Processor('stock')
class StockProcessor {
  @Process()
  run(job: ActiveJob<Step>) {
    return step(job);
  }
}

describe('flows and dependencies', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 200 },
      queues: [
        { name: 'orders', defaultJobOptions: { attempts: 1 } },
        { name: 'stock', defaultJobOptions: { attempts: 1 } },
      ],
      providers: [OrdersProcessor, StockProcessor],
    });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    for (const g of gates.values()) g.open();
    await app?.close();
  });

  const state = async (id: string) => (await queues.getJob(id))?.state;
  const ran = (id: string) => runs.filter((r) => r.id === id);

  it('runs the parent once, after every child across two queues, with their results in one read', async () => {
    const flow: FlowNode = await queues.addFlow({
      queue: 'orders',
      name: 'ship',
      payload: {},
      children: [
        { queue: 'stock', name: 'reserve', payload: { value: { sku: 'a' }, gate: 'reserve-a' } },
        { queue: 'stock', name: 'reserve', payload: { value: { sku: 'b' } } },
        { queue: 'orders', name: 'charge', payload: { value: 42 } },
      ],
    });
    const parent = flow.job;
    expect(parent.state).toBe('waiting-children');
    expect(flow.children.map((c) => c.job.state)).toEqual(['waiting', 'waiting', 'waiting']);
    const [a, b, c] = flow.children.map((n) => n.job.id);
    // While child a is held, the parent waits, and says on what.
    await waitFor(async () => (await state(b)) === 'completed' && (await state(c)) === 'completed', {
      message: 'children b and c to complete',
    });
    const waiting = await queues.getJob(parent.id);
    expect(waiting?.state).toBe('waiting-children');
    expect(waiting?.flow).toEqual({ parentIds: [], dependencies: 3, pendingDependencies: 1, pendingDependencyIds: [a] });
    expect((await queues.getJob(b))?.flow?.parentIds).toEqual([parent.id]);
    expect((await queues.getCounts()).orders.waitingChildren).toBe(1);
    expect(ran(parent.id)).toEqual([]);

    gate('reserve-a').open();
    await waitFor(async () => (await state(parent.id)) === 'completed', { message: 'the parent to complete' });
    expect(ran(parent.id)).toHaveLength(1);
    expect(ran(parent.id)[0].children).toEqual([
      { id: a, queue: 'stock', name: 'reserve', state: 'completed', result: { sku: 'a' }, error: null, onFailure: 'fail-parent' },
      { id: b, queue: 'stock', name: 'reserve', state: 'completed', result: { sku: 'b' }, error: null, onFailure: 'fail-parent' },
      { id: c, queue: 'orders', name: 'charge', state: 'completed', result: 42, error: null, onFailure: 'fail-parent' },
    ]);
    for (const id of [a, b, c]) expect(ran(id)).toHaveLength(1);
    expect((await queues.getCounts()).orders.waitingChildren).toBe(0);
  });

  it("a child that fails for good fails its parent and the parent's parent, none of which runs", async () => {
    const flow = await queues.addFlow({
      queue: 'orders',
      name: 'top',
      payload: {},
      children: [
        {
          queue: 'orders',
          name: 'middle',
          payload: {},
          children: [
            { queue: 'stock', name: 'bad', payload: { fail: true } },
            { queue: 'stock', name: 'slow', payload: { gate: 'slow' } },
          ],
        },
      ],
    });
    const top = flow.job.id;
    const middle = flow.children[0].job.id;
    const bad = flow.children[0].children[0].job.id;
    await waitFor(async () => (await state(top)) === 'failed', { message: 'the top job to fail' });
    const m = await queues.getJob(middle);
    expect(m?.state).toBe('failed');
    expect(m?.errors.at(-1)).toMatchObject({ name: 'ChildFailedError' });
    expect(m?.errors.at(-1)?.message).toContain(`Child job ${bad} (stock/bad) ended failed`);
    expect((await queues.getJob(top))?.errors.at(-1)?.message).toContain(`Child job ${middle} (orders/middle) ended failed`);
    expect(ran(top)).toEqual([]);
    expect(ran(middle)).toEqual([]);
    // The other child carries on and completes; nothing is left to release.
    gate('slow').open();
    const slow = flow.children[0].children[1].job.id;
    await waitFor(async () => (await state(slow)) === 'completed', { message: 'the slow child to complete' });
    expect(await state(middle)).toBe('failed');
  });

  it("onFailure 'ignore': the parent runs once every child ended, and sees which failed", async () => {
    const flow = await queues.addFlow({
      queue: 'orders',
      name: 'report',
      payload: {},
      children: [
        { queue: 'stock', name: 'bad', payload: { fail: true }, onFailure: 'ignore' },
        { queue: 'stock', name: 'good', payload: { value: 'ok' } },
      ],
    });
    await waitFor(async () => (await state(flow.job.id)) === 'completed', { message: 'the parent to complete' });
    const [seen] = ran(flow.job.id);
    expect(seen.children?.map((c) => [c.name, c.state, c.result, c.onFailure])).toEqual([
      ['bad', 'failed', null, 'ignore'],
      ['good', 'completed', 'ok', 'fail-parent'],
    ]);
    expect(seen.children?.[0].error?.message).toContain('fails');
  });

  it('a cancelled or removed waiting child ends its parent per policy, not a silent hang', async () => {
    await queues.getQueue('stock').pause();
    try {
      const failing = await queues.addFlow({
        queue: 'orders',
        name: 'p1',
        payload: {},
        children: [{ queue: 'stock', name: 'c', payload: {} }],
      });
      const ignoring = await queues.addFlow({
        queue: 'orders',
        name: 'p2',
        payload: {},
        children: [{ queue: 'stock', name: 'c', payload: {}, onFailure: 'ignore' }],
      });
      const removed = await queues.addFlow({
        queue: 'orders',
        name: 'p3',
        payload: {},
        children: [{ queue: 'stock', name: 'c', payload: {} }],
      });
      expect(await queues.getQueue('stock').cancel(failing.children[0].job.id)).toBe('cancelled');
      expect(await queues.getQueue('stock').cancel(ignoring.children[0].job.id)).toBe('cancelled');
      expect(await queues.getQueue('stock').remove(removed.children[0].job.id)).toBe(true);
      const p1 = await queues.getJob(failing.job.id);
      expect(p1?.state).toBe('failed');
      expect(p1?.errors.at(-1)?.message).toContain('ended cancelled');
      const p3 = await queues.getJob(removed.job.id);
      expect(p3?.state).toBe('failed');
      expect(p3?.errors.at(-1)?.message).toContain('ended removed');
      await waitFor(async () => (await state(ignoring.job.id)) === 'completed', { message: 'p2 to run' });
      expect(ran(ignoring.job.id)[0].children?.map((c) => c.state)).toEqual(['cancelled']);
    } finally {
      await queues.getQueue('stock').resume();
    }
  });

  it('cancelling or removing a parent that waits on children leaves the children to run', async () => {
    await queues.getQueue('stock').pause();
    let child: string;
    let other: string;
    try {
      const a = await queues.addFlow({
        queue: 'orders',
        name: 'pa',
        payload: {},
        children: [{ queue: 'stock', name: 'c', payload: {} }],
      });
      const b = await queues.addFlow({
        queue: 'orders',
        name: 'pb',
        payload: {},
        children: [{ queue: 'stock', name: 'c', payload: {} }],
      });
      child = a.children[0].job.id;
      other = b.children[0].job.id;
      expect(await queues.getQueue('orders').cancel(a.job.id)).toBe('cancelled');
      expect(await queues.getQueue('orders').remove(b.job.id)).toBe(true);
      expect(await state(a.job.id)).toBe('cancelled');
      expect(await queues.getJob(b.job.id)).toBeNull();
    } finally {
      await queues.getQueue('stock').resume();
    }
    await waitFor(async () => (await state(child)) === 'completed' && (await state(other)) === 'completed', {
      message: 'the children of the cancelled and removed parents to complete',
    });
  });

  it('a child retried after it failed does not release its parent a second time', async () => {
    // Parent of two children, both 'ignore': a fails; retried, it completes; the parent must
    // still wait for b (pending 1), not be released by a's second ending.
    const flow = await queues.addFlow({
      queue: 'orders',
      name: 'twice',
      payload: {},
      children: [
        { queue: 'stock', name: 'flaky', payload: { fail: true }, onFailure: 'ignore' },
        { queue: 'stock', name: 'held', payload: { gate: 'held' }, onFailure: 'ignore' },
      ],
    });
    const [a, b] = flow.children.map((c) => c.job.id);
    await waitFor(async () => (await state(a)) === 'failed', { message: 'child a to fail' });
    expect((await queues.getJob(flow.job.id))?.flow?.pendingDependencies).toBe(1);
    // Run a again, this time succeeding: rewrite its payload in place, then retry it; and while
    // it waits, make another job depend on it, so its second ending does fire the release (for
    // that new job) and must leave the parent's already resolved edge alone.
    await ctx.pool.query(`UPDATE pgqueue.job_history SET payload = '{}' WHERE id = $1`, [a]);
    const stock = queues.getQueue('stock');
    await stock.pause();
    let later: Job;
    try {
      expect(await stock.retry(a)).toBe(true);
      later = await queues.add('orders', 'after-retry', {}, { dependsOn: [a] });
      expect(later.state).toBe('waiting-children');
    } finally {
      await stock.resume();
    }
    await waitFor(async () => (await state(a)) === 'completed', { message: 'child a to complete on retry' });
    await waitFor(async () => (await state(later.id)) === 'completed', { message: 'the job added on the retried child to run' });
    const parent = await queues.getJob(flow.job.id);
    expect(parent?.state).toBe('waiting-children');
    expect(parent?.flow?.pendingDependencies).toBe(1);
    const { rows } = await ctx.pool.query(`SELECT pending_dependencies FROM pgqueue.jobs WHERE id = $1`, [flow.job.id]);
    expect(rows).toEqual([{ pending_dependencies: 1 }]);
    expect(ran(flow.job.id)).toEqual([]);
    await waitFor(() => reached.has('held'), { message: 'child b to start' });
    gate('held').open();
    await waitFor(async () => (await state(flow.job.id)) === 'completed', { message: 'the parent to run after b' });
    expect(ran(flow.job.id)).toHaveLength(1);
    // It sees a as it is now: completed on its retry.
    expect(ran(flow.job.id)[0].children?.map((c) => c.state)).toEqual(['completed', 'completed']);
    expect(ran(b)).toHaveLength(1);
  });

  describe('dependsOn: a new job that waits on existing ones', () => {
    it('waits for the live ones, counts completed ones as done, and runs once', async () => {
      const stock = queues.getQueue('stock');
      const done = await stock.add('early', { value: 'early' });
      await waitFor(async () => (await state(done.id)) === 'completed', { message: 'the early job to complete' });
      const live = await stock.add('late', { gate: 'late', value: 'late' });
      const fanIn: Job = await queues.add('orders', 'fan-in', {}, { dependsOn: [done.id, { id: live.id, onFailure: 'ignore' }] });
      expect(fanIn.state).toBe('waiting-children');
      expect((await queues.getJob(fanIn.id))?.flow).toMatchObject({ dependencies: 2, pendingDependencies: 1 });
      // A second job on the same dependency: a DAG, not only a tree.
      const second = await queues.add('orders', 'fan-in-2', {}, { dependsOn: [live.id] });
      expect((await queues.getJob(live.id))?.flow?.parentIds).toEqual([fanIn.id, second.id]);
      await waitFor(() => reached.has('late'), { message: 'the late job to start' });
      gate('late').open();
      await waitFor(async () => (await state(fanIn.id)) === 'completed' && (await state(second.id)) === 'completed', {
        message: 'both dependents to run',
      });
      expect(ran(fanIn.id)[0].children?.map((c) => [c.id, c.state, c.result])).toEqual([
        [done.id, 'completed', 'early'],
        [live.id, 'completed', 'late'],
      ]);
    });

    it('in a TypeORM transaction: the dependency is locked there, and a rollback leaves no job and no edge', async () => {
      const ds = new DataSource({ type: 'postgres', url: ctx.db.url });
      await ds.initialize();
      try {
        const stock = queues.getQueue('stock');
        await stock.pause();
        try {
          const dep = await stock.add('dep', {});
          await expect(
            ds.transaction(async (manager) => {
              await queues.add('orders', 'waits', {}, { dependsOn: [dep.id], manager });
              throw new Error('rolled back');
            }),
          ).rejects.toThrow('rolled back');
          expect((await queues.getJob(dep.id))?.flow).toBeUndefined();
          const kept = await ds.transaction((manager) => queues.add('orders', 'waits', {}, { dependsOn: [dep.id], manager }));
          expect(kept.state).toBe('waiting-children');
          expect((await queues.getJob(dep.id))?.flow?.parentIds).toEqual([kept.id]);
          await stock.resume();
          await waitFor(async () => (await state(kept.id)) === 'completed', { message: 'the dependent to run' });
        } finally {
          await stock.resume();
        }
      } finally {
        await ds.destroy();
      }
    });

    it('all dependencies already completed: the job is waiting at once', async () => {
      const done = await queues.getQueue('stock').add('early', {});
      await waitFor(async () => (await state(done.id)) === 'completed', { message: 'the job to complete' });
      const job = await queues.add('orders', 'after', {}, { dependsOn: [done.id] });
      expect(job.state).toBe('waiting');
      await waitFor(async () => (await state(job.id)) === 'completed', { message: 'the dependent to run' });
    });

    it('refuses an unknown id, and a failed one under fail-parent, storing nothing', async () => {
      const before = (await ctx.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n;
      const err = await queues.add('orders', 'x', {}, { dependsOn: ['999999999'] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DependencyError);
      expect(err).toMatchObject({ dependencyId: '999999999', reason: 'unknown' });
      const failed = await queues.getQueue('stock').add('bad', { fail: true });
      await waitFor(async () => (await state(failed.id)) === 'failed', { message: 'the job to fail' });
      const err2 = await queues.add('orders', 'x', {}, { dependsOn: [failed.id] }).catch((e: unknown) => e);
      expect(err2).toMatchObject({ reason: 'failed' });
      expect((err2 as Error).message).toContain(`onFailure: 'ignore'`);
      expect((await ctx.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n).toBe(before);
      // With 'ignore' the failed dependency counts as done.
      const ok = await queues.add('orders', 'x', {}, { dependsOn: [{ id: failed.id, onFailure: 'ignore' }] });
      expect(ok.state).toBe('waiting');
    });

    it('refuses malformed dependsOn and flows at the call', async () => {
      await expect(queues.add('orders', 'x', {}, { dependsOn: 'nope' as never })).rejects.toThrow(/dependsOn must be an array/);
      await expect(queues.add('orders', 'x', {}, { dependsOn: ['abc'] })).rejects.toThrow(/dependsOn\[0\] is "abc"/);
      await expect(queues.add('orders', 'x', {}, { dependsOn: ['1'], uniqueKey: 'k' })).rejects.toThrow(/uniqueKey/);
      await expect(
        queues.addFlow({ queue: 'orders', name: 'x', payload: {}, children: [{ queueName: 'stock' } as never] }),
      ).rejects.toThrow(/unknown key "queueName" \(use queue\)/);
      await expect(
        queues.addFlow({ queue: 'orders', name: 'x', payload: {}, children: [{ queue: 'nowhere', name: 'y', payload: {} }] }),
      ).rejects.toThrow(/not registered/);
      await expect(
        queues.addFlow({ queue: 'orders', name: 'x', payload: {}, opts: { uniqueKey: 'k' } as never }),
      ).rejects.toThrow(/uniqueKey/);
      await expect(
        queues.addFlow({
          queue: 'orders',
          name: 'x',
          payload: {},
          children: [{ queue: 'stock', name: 'y', payload: {}, onFailure: 'skip' as never }],
        }),
      ).rejects.toThrow(/onFailure must be 'fail-parent' or 'ignore'/);
    });
  });
});
