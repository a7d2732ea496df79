import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import {
  PgQueueConfigError,
  PgQueuePayloadError,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type Job,
  type Queue,
} from '../../lib';
import { buildJobList } from '../../lib/db/dashboard-queries';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Issue 27 points 1 and 2 (part): getJobs with keyset paging over live jobs and history,
// getJobCounts in BullMQ's shape, getJobByKey; promote, promoteJobs, changePriority, changeDelay
// and updatePayload, each of a waiting job only, with workers running.

const started = new Set<string>();
const seen = new Map<string, unknown>();
const releases = new Map<string, () => void>();

type LivePayload = { hold?: boolean; fail?: boolean; v?: number };

@Processor('live')
class LiveProcessor {
  @Process()
  async run(job: ActiveJob<LivePayload>) {
    started.add(job.id);
    seen.set(job.id, job.payload);
    if (job.payload.hold) await new Promise<void>((r) => releases.set(job.id, r));
    if (job.payload.fail) throw new Error('fails');
    return 'ok';
  }
}

describe('getJobs, getJobCounts, getJobByKey; promote and the changes of a waiting job', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let idle: Queue<{ a: { i: number }; b: { i: number } }>;
  let live: Queue<{ x: LivePayload; y: LivePayload }>;

  beforeAll(async () => {
    app = await bootApp({
      // A poll a minute away: a promoted job that runs at once was woken by the promote's NOTIFY.
      options: { connection: t.db.url, pollIntervalMs: 60_000, maxPayloadBytes: 1000 },
      queues: [{ name: 'idle' }, { name: 'live', defaultJobOptions: { attempts: 1 } }],
      providers: [LiveProcessor],
    });
    idle = app.get(QueueService).getQueue('idle');
    live = app.get(QueueService).getQueue('live');
  });
  afterAll(async () => {
    for (const r of releases.values()) r();
    await app?.close();
  });

  /** Every job of `states` (and name), page by page of `limit`; also the page sizes. */
  async function all(q: Queue, opts: { states?: Job['state'][]; name?: string }, limit: number) {
    const ids: string[] = [];
    const sizes: number[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await q.getJobs({ ...opts, limit, ...(after ? { after } : {}) });
      ids.push(...page.jobs.map((j) => j.id));
      sizes.push(page.jobs.length);
      if (!page.next) return { ids, sizes };
      after = page.next;
    }
    throw new Error('more than 100 pages');
  }

  it('getJobs pages waiting jobs in claim order, then delayed ones, by keyset', async () => {
    const due = await idle.addBulk(
      Array.from({ length: 25 }, (_, i) => ({
        name: i % 2 ? ('a' as const) : ('b' as const),
        payload: { i },
        opts: { priority: i % 3 },
      })),
    );
    const delayed = await idle.addBulk(
      Array.from({ length: 5 }, (_, i) => ({ name: 'a' as const, payload: { i: 100 + i }, opts: { delayMs: 3_600_000 } })),
    );
    const claimOrder = [...due].sort((x, y) => x.priority - y.priority || Number(x.id) - Number(y.id)).map((j) => j.id);
    const { ids, sizes } = await all(idle, { states: ['delayed', 'waiting'] }, 7);
    expect(ids).toEqual([...claimOrder, ...delayed.map((j) => j.id)]);
    expect(sizes).toEqual([7, 7, 7, 7, 2]);

    const onlyA = await all(idle, { states: ['waiting'], name: 'a' }, 4);
    expect(onlyA.ids).toEqual(claimOrder.filter((id) => due.find((j) => j.id === id)?.name === 'a'));
    const first = await idle.getJobs({ state: 'delayed', limit: 2 });
    expect(first.jobs.map((j) => j.state)).toEqual(['delayed', 'delayed']);
    expect(first.jobs[0].payload).toEqual({ i: 100 });
  });

  it('getJobs pages history newest first, across states, and every state by default', async () => {
    const jobs = await live.addBulk(
      Array.from({ length: 12 }, (_, i) => ({ name: 'x' as const, payload: { fail: i % 3 === 0 } })),
    );
    await waitFor(async () => (await live.getJobCounts('completed', 'failed')).completed === 8, { message: 'eight completed' });
    await waitFor(async () => (await live.getJobCounts('failed')).failed === 4, { message: 'four failed' });
    const newestFirst = (xs: Job[]) => xs.map((j) => j.id).sort((p, q) => Number(q) - Number(p));
    const done = await all(live, { states: ['failed', 'completed'] }, 5);
    expect(done.ids).toEqual([
      ...newestFirst(jobs.filter((_, i) => i % 3 !== 0)),
      ...newestFirst(jobs.filter((_, i) => i % 3 === 0)),
    ]);
    const everything = await all(live, {}, 50);
    expect([...everything.ids].sort()).toEqual(jobs.map((j) => j.id).sort());
    const failed = await live.getJobs({ state: 'failed' });
    expect(failed.next).toBeUndefined();
    expect(failed.jobs.every((j) => j.state === 'failed' && j.errors.length === 1)).toBe(true);
  });

  it('getJobs refuses unknown keys, states and a cursor of other states', async () => {
    await expect(live.getJobs({ types: ['failed'] } as never)).rejects.toThrow(/"types" \(use states\)/);
    await expect(live.getJobs({ state: 'wait' as never })).rejects.toThrow(/BullMQ's 'wait' is 'waiting' here/);
    await expect(live.getJobs({ state: 'failed', states: ['completed'] })).rejects.toThrow(PgQueueConfigError);
    await expect(live.getJobs({ limit: 0 })).rejects.toThrow(PgQueueConfigError);
    await expect(live.getJobs({ after: 'nonsense' })).rejects.toThrow(/after must be the next of a previous page/);
    const page = await live.getJobs({ state: 'completed', limit: 1 });
    expect(page.next).toEqual(expect.any(String));
    await expect(live.getJobs({ state: 'failed', after: page.next })).rejects.toThrow(/not among the states asked/);
  });

  it('a page deep in the history reads about a page of it, on an index, not a scan', async () => {
    await t.pool.query(
      `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
       SELECT 1000000000 + g, CASE WHEN (g / 2) % 4 = 0 THEN 'deep' ELSE 'other' END, 'x', '{}',
              CASE WHEN g % 2 = 0 THEN 'failed' ELSE 'completed' END, 0, now(), 1, 1, '[]', now(), now()
       FROM generate_series(1, 40000) g`,
    );
    await t.pool.query('ANALYZE pgqueue.job_history');
    // The walk of the index that finds a page (the CTE `scan` of buildJobList), from the executed
    // plan: a page of 100 in the middle of 5,000 completed and 5,000 failed jobs of the queue,
    // among 30,000 of another, reads about a page of index entries, never a partition. (The rows
    // are then read by id; at this size the planner may hash the page against the failed
    // partition, 20,000 rows; at 1,000,000 finished jobs it probes by id: 417 buffers, 1.1 ms.)
    type PlanNode = {
      'Node Type': string;
      'Relation Name'?: string;
      'Subplan Name'?: string;
      'Actual Rows'?: number;
      'Actual Loops'?: number;
      'Rows Removed by Filter'?: number;
      Plans?: PlanNode[];
    };
    const walk = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(walk)];
    for (const state of ['completed', 'failed'] as const) {
      const { text, values } = buildJobList('pgqueue', state, {
        queue: 'deep',
        cursor: { id: String(1000000000 + 20000) },
        filters: {},
        limit: 100,
      });
      const { rows } = await t.pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
        values,
      );
      const cte = walk(rows[0]['QUERY PLAN'][0].Plan).find((n) => n['Subplan Name'] === 'CTE scan');
      expect(cte).toBeDefined();
      const nodes = walk(cte as PlanNode).filter((n) => n['Relation Name']?.startsWith('job_history'));
      expect(nodes.length).toBeGreaterThan(0);
      // An empty partition (ANALYZEd: 0 pages) is planned as a Seq Scan that reads nothing.
      const rowsOf = (n: PlanNode) => ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0)) * (n['Actual Loops'] ?? 1);
      expect(nodes.filter((n) => !/Index/.test(n['Node Type']) && rowsOf(n) > 0).map((n) => n['Relation Name'])).toEqual([]);
      const read = nodes.reduce((sum, n) => sum + rowsOf(n), 0);
      expect(read).toBeLessThan(1000);
      const page = await app.get(QueueService).getJobs('idle', { state, limit: 5 });
      expect(page.jobs).toEqual([]);
    }
    const deep = app.get(QueueService);
    const { ids } = await (async () => {
      const out: string[] = [];
      let after: string | undefined;
      do {
        const page = await deep.getJobs('live', { state: 'failed', limit: 3, ...(after ? { after } : {}) });
        out.push(...page.jobs.map((j) => j.id));
        after = page.next;
      } while (after);
      return { ids: out };
    })();
    expect(ids).toHaveLength(4);
  });

  it("getJobCounts answers BullMQ's shape, only the states asked", async () => {
    expect(await idle.getJobCounts()).toEqual({
      active: 0,
      waiting: 25,
      delayed: 5,
      'waiting-children': 0,
      completed: 0,
      failed: 0,
      cancelled: 0,
    });
    expect(await idle.getJobCounts('delayed', 'waiting')).toEqual({ waiting: 25, delayed: 5 });
    expect(await app.get(QueueService).getJobCounts('live', 'completed', 'failed')).toEqual({ completed: 8, failed: 4 });
    await expect(idle.getJobCounts('paused' as never)).rejects.toThrow(PgQueueConfigError);
  });

  it('getJobByKey finds the live job holding a unique key', async () => {
    const job = await idle.add('a', { i: 1 }, { uniqueKey: 'k-1' });
    expect((await idle.getJobByKey('k-1'))?.id).toBe(job.id);
    expect(await idle.getJobByKey('k-2')).toBeNull();
    expect(await live.getJobByKey('k-1')).toBeNull(); // another queue's key
    expect((await app.get(QueueService).getJobByKey('idle', 'k-1'))?.id).toBe(job.id);
    await expect(idle.getJobByKey('')).rejects.toThrow(PgQueueConfigError);
    expect(await idle.remove(job.id)).toBe(true);
  });

  it('promote makes a delayed job due now and wakes the workers', async () => {
    const later = await live.add('x', { v: 1 }, { delayMs: 3_600_000 });
    expect((await live.getJob(later.id))?.state).toBe('delayed');
    expect(await live.promote(later.id)).toBe(true);
    await waitFor(async () => (await live.getJob(later.id))?.state === 'completed', { message: 'the promoted job to run' });
    expect(await live.promote(later.id)).toBe(false); // finished
    const due = await idle.add('a', { i: 2 });
    expect(await idle.promote(due.id)).toBe(false); // due already
    expect(await idle.promote('nonsense')).toBe(false);
    expect(await app.get(QueueService).promote('live', due.id)).toBe(false); // another queue's job
    expect(await idle.remove(due.id)).toBe(true);
  });

  it('promoteJobs makes every delayed job (of one name) due, in batches, with workers running', async () => {
    const xs = await live.addBulk(
      Array.from({ length: 5 }, () => ({ name: 'x' as const, payload: {}, opts: { delayMs: 3_600_000 } })),
    );
    const ys = await live.addBulk(
      Array.from({ length: 3 }, () => ({ name: 'y' as const, payload: {}, opts: { delayMs: 3_600_000 } })),
    );
    expect(await live.promoteJobs({ name: 'x' })).toBe(5);
    await waitFor(async () => (await Promise.all(xs.map((j) => live.getJob(j.id)))).every((j) => j?.state === 'completed'), {
      message: 'the promoted x jobs to run',
    });
    expect((await Promise.all(ys.map((j) => live.getJob(j.id)))).map((j) => j?.state)).toEqual(['delayed', 'delayed', 'delayed']);
    expect(await app.get(QueueService).promoteJobs('live')).toBe(3);
    await waitFor(async () => (await Promise.all(ys.map((j) => live.getJob(j.id)))).every((j) => j?.state === 'completed'));
    expect(await live.promoteJobs()).toBe(0);
    await expect(live.promoteJobs({ count: 5 } as never)).rejects.toThrow(PgQueueConfigError);

    // More delayed jobs than one batch: the loop goes on until a batch comes back short.
    await idle.addBulk(
      Array.from({ length: 7 }, () => ({ name: 'b' as const, payload: { i: 0 }, opts: { delayMs: 3_600_000 } })),
    );
    const store = runtimeOf(app).connections[0].store;
    expect(await store.promoteMany('idle', 'b', 2)).toBe(7);
    expect((await idle.getJobCounts('delayed')).delayed).toBe(5);
  });

  it('changePriority, changeDelay and updatePayload change a waiting job', async () => {
    const job = await idle.add('a', { i: 7 });
    expect(await idle.changePriority(job.id, 5)).toBe(true);
    expect((await idle.getJob(job.id))?.priority).toBe(5);
    expect(await idle.changeDelay(job.id, 3_600_000)).toBe(true);
    expect((await idle.getJob(job.id))?.state).toBe('delayed');
    expect(await idle.changeDelay(job.id, 0)).toBe(true);
    expect((await idle.getJob(job.id))?.state).toBe('waiting');
    expect(await idle.updatePayload(job.id, { i: 8 })).toBe(true);
    expect((await idle.getJob(job.id))?.payload).toEqual({ i: 8 });
    expect(await app.get(QueueService).updatePayload('idle', job.id, { i: 9 })).toBe(true);
    expect((await idle.getJob(job.id))?.payload).toEqual({ i: 9 });

    await expect(idle.updatePayload(job.id, { i: 'x'.repeat(2000) } as never)).rejects.toThrow(PgQueuePayloadError);
    await expect(idle.updatePayload(job.id, { i: 1n } as never)).rejects.toThrow(PgQueuePayloadError);
    await expect(idle.changePriority(job.id, 1.5)).rejects.toThrow(PgQueueConfigError);
    await expect(idle.changeDelay(job.id, -1)).rejects.toThrow(PgQueueConfigError);
    expect((await idle.getJob(job.id))?.payload).toEqual({ i: 9 });
    expect(await live.changePriority(job.id, 1)).toBe(false); // another queue's job
    expect(await idle.remove(job.id)).toBe(true);
    expect(await idle.changePriority(job.id, 1)).toBe(false); // gone
  });

  it("a change with { client } commits or rolls back with the caller's transaction, and needs one", async () => {
    const job = await idle.add('a', { i: 20 }, { delayMs: 3_600_000 });
    const client = await t.pool.connect();
    try {
      await expect(idle.changePriority(job.id, 4, { client })).rejects.toThrow(PgQueueConfigError); // not in a transaction
      await client.query('BEGIN');
      expect(await idle.changePriority(job.id, 4, { client })).toBe(true);
      expect(await idle.updatePayload(job.id, { i: 21 }, { client })).toBe(true);
      expect((await idle.getJob(job.id, { client }))?.payload).toEqual({ i: 21 });
      await client.query('ROLLBACK');
      expect((await idle.getJob(job.id))?.priority).toBe(0);
      expect((await idle.getJob(job.id))?.payload).toEqual({ i: 20 });
      await client.query('BEGIN');
      expect(await idle.promote(job.id, { client })).toBe(true);
      await client.query('COMMIT');
      expect((await idle.getJob(job.id))?.state).toBe('waiting');
    } finally {
      client.release();
    }
    expect(await idle.remove(job.id)).toBe(true);
  });

  it('a running or finished job is never changed', async () => {
    const held = await live.add('x', { hold: true, v: 1 });
    await waitFor(() => releases.has(held.id), { message: 'the held job to start' });
    expect(await live.changePriority(held.id, 9)).toBe(false);
    expect(await live.changeDelay(held.id, 1000)).toBe(false);
    expect(await live.updatePayload(held.id, { v: 2 })).toBe(false);
    expect(await live.promote(held.id)).toBe(false);
    releases.get(held.id)?.();
    await waitFor(async () => (await live.getJob(held.id))?.state === 'completed', { message: 'the held job to complete' });
    const done = await live.getJob(held.id);
    expect(done?.payload).toEqual({ hold: true, v: 1 });
    expect(done?.priority).toBe(0);
    expect(await live.updatePayload(held.id, { v: 3 })).toBe(false);
    expect(await live.changeDelay(held.id, 0)).toBe(false);
    expect(seen.get(held.id)).toEqual({ hold: true, v: 1 });
  });
});
