import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import path from 'node:path';
import { Client } from 'pg';
import { QueueService, type RegisterQueueOptions } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { killAll, ROOT, startWorkerProcess, untilReady, type WorkerProcess } from '../support/worker-process';

// Grouped queues (docs/groups.md) across THREE worker processes (test/fixtures/group-worker-process.js,
// the BUILT package): every limit is checked from the database's own timestamps (job_history's
// started_at and finished_at), never from the workers' counters.

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'group-worker-process.js');

const QUEUES: RegisterQueueOptions[] = [
  { name: 'conc', concurrency: 10, group: { concurrency: 2 } },
  { name: 'rate', concurrency: 10, group: { limiter: { max: 3, durationMs: 1000 } } },
  { name: 'fifo', concurrency: 10, group: { order: 'fifo' } },
  { name: 'vip', concurrency: 10, group: { concurrency: 1 } },
];

type Worker = WorkerProcess;
const started: Worker[] = [];

function startWorker(name: string, url: string, env: Record<string, string> = {}): Worker {
  return startWorkerProcess(started, FIXTURE, name, {
    DB_URL: url,
    PGQ_QUEUES: JSON.stringify(QUEUES),
    // A short lease, renewed often: a SIGKILLed node's jobs are rescued within seconds.
    PGQ_POLL_MS: '200',
    PGQ_LEASE_MS: '3000',
    PGQ_HEARTBEAT_MS: '500',
    PGQ_RESCUE_MS: '500',
    ...env,
  });
}

interface Run {
  id: string;
  grp: string;
  s: number;
  f: number;
}

/** The most jobs of one group whose [started_at, finished_at) overlap at any instant. */
function maxOverlap(runs: readonly Run[]): number {
  const events = runs.flatMap((r) => [
    [r.s, 1],
    [r.f, -1],
  ]);
  // An end before a start at the same instant: a slot freed and taken in the same millisecond.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let max = 0;
  for (const [, d] of events) max = Math.max(max, (now += d));
  return max;
}

function byGroup(runs: readonly Run[]): Map<string, Run[]> {
  const m = new Map<string, Run[]>();
  for (const r of runs) m.set(r.grp, [...(m.get(r.grp) ?? []), r]);
  return m;
}

describe('grouped queues across three processes', () => {
  let db: TestDatabase;
  let sql: Client;
  let producer: INestApplicationContext;
  let queues: QueueService;

  const runsOf = async (queue: string): Promise<Run[]> =>
    (
      await sql.query<Run>(
        `SELECT id::text AS id, group_key AS grp, extract(epoch FROM started_at)::float8 * 1000 AS s,
                extract(epoch FROM finished_at)::float8 * 1000 AS f
         FROM pgqueue.job_history WHERE queue = $1 AND state = 'completed' ORDER BY id`,
        [queue],
      )
    ).rows;
  const completed = async (queue: string): Promise<number> =>
    (
      await sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1 AND state = 'completed'`,
        [queue],
      )
    ).rows[0].n;
  const drained = (queue: string, n: number) =>
    waitFor(async () => (await completed(queue)) >= n, {
      timeoutMs: 60_000,
      intervalMs: 100,
      message: async () => `${n} completed jobs of ${queue}; now ${await completed(queue)}`,
    });

  beforeAll(async () => {
    assertBuilt();
    db = await createTestDatabase();
    const workers = [1, 2, 3].map((i) => startWorker(`worker-${i}`, db.url));
    await Promise.all(workers.map(untilReady));
    sql = new Client({ connectionString: db.url });
    await sql.connect();
    producer = await bootApp({ options: { connection: db.url, workers: false }, queues: QUEUES });
    await producer.init();
    queues = producer.get(QueueService);
  }, 60_000);

  afterAll(async () => {
    await killAll(started);
    await producer?.close();
    await sql?.end().catch(() => undefined);
    await db?.drop();
  });

  it('group.concurrency 2 is never exceeded, and a flooding group starves none of the small ones', async () => {
    const flood = Array.from({ length: 300 }, (_, i) => ({ name: 'job', payload: { i, ms: 20 }, opts: { group: 'big' } }));
    await queues.addBulk('conc', flood);
    const small = Array.from({ length: 60 }, (_, i) => ({ name: 'job', payload: { i, ms: 20 }, opts: { group: `t${i % 20}` } }));
    await queues.addBulk('conc', small);
    await drained('conc', 360);
    const runs = await runsOf('conc');
    for (const [g, rs] of byGroup(runs)) {
      if (maxOverlap(rs) > 2) throw new Error(`group ${g} ran ${maxOverlap(rs)} jobs at once`);
    }
    // 2 at a time, the flood takes 150 rounds of 20 ms; the small groups, added after it, end
    // long before: their last job finished while most of the flood was still waiting.
    const lastSmall = Math.max(...runs.filter((r) => r.grp !== 'big').map((r) => r.f));
    const bigAfter = runs.filter((r) => r.grp === 'big' && r.s > lastSmall).length;
    expect(bigAfter).toBeGreaterThan(150);
    // The limit, not a stall, shaped it: the flood did run two at a time.
    expect(maxOverlap(runs.filter((r) => r.grp === 'big'))).toBe(2);
  }, 90_000);

  it('group.limiter { max: 3, durationMs: 1000 }: no group starts more than 3 jobs in any second, across the nodes', async () => {
    for (const g of ['a', 'b'])
      await queues.addBulk(
        'rate',
        Array.from({ length: 9 }, (_, i) => ({ name: 'job', payload: { i, ms: 1 }, opts: { group: g } })),
      );
    await drained('rate', 18);
    for (const [g, rs] of byGroup(await runsOf('rate'))) {
      const starts = rs.map((r) => r.s).sort((x, y) => x - y);
      for (let i = 0; i < starts.length; i++) {
        const inWindow = starts.filter((t) => t <= starts[i] && t > starts[i] - 1000).length;
        if (inWindow > 3) throw new Error(`group ${g}: ${inWindow} starts within 1 s up to ${starts[i]}`);
      }
    }
  }, 60_000);

  it("order 'fifo': one job of a group at a time, in the order they were added", async () => {
    for (const g of ['x', 'y', 'z'])
      await queues.addBulk(
        'fifo',
        Array.from({ length: 10 }, (_, i) => ({ name: 'job', payload: { i, ms: 10 }, opts: { group: g } })),
      );
    await drained('fifo', 30);
    const runs = await runsOf('fifo');
    for (const [g, rs] of byGroup(runs)) {
      for (let i = 1; i < rs.length; i++) {
        // ids ascending (ORDER BY id): each started after the one before it finished.
        if (rs[i].s < rs[i - 1].f) throw new Error(`group ${g}: job ${rs[i].id} started before ${rs[i - 1].id} finished`);
      }
    }
    // Groups ran side by side (one each), not one after the other.
    expect(maxOverlap(runs)).toBeGreaterThan(1);
  }, 60_000);

  it('setGroupConcurrency applies at runtime: the overridden group runs 4 at once, the others still 1', async () => {
    await queues.setGroupConcurrency('vip', 'gold', 4);
    expect(await queues.getGroupConcurrency('vip', 'gold')).toBe(4);
    for (const g of ['gold', 'plain'])
      await queues.addBulk(
        'vip',
        Array.from({ length: 24 }, (_, i) => ({ name: 'job', payload: { i, ms: 100 }, opts: { group: g } })),
      );
    await drained('vip', 48);
    const groups = byGroup(await runsOf('vip'));
    const gold = maxOverlap(groups.get('gold')!);
    expect(gold).toBeLessThanOrEqual(4);
    expect(gold).toBeGreaterThan(1);
    expect(maxOverlap(groups.get('plain')!)).toBe(1);
    await queues.setGroupConcurrency('vip', 'gold', null);
    expect(await queues.getGroupConcurrency('vip', 'gold')).toBeNull();
  }, 60_000);

  it("a SIGKILLed node's group slot comes back with its lease", async () => {
    // A fourth node, so that three remain once the one holding group k's only slot dies.
    await untilReady(startWorker('worker-4', db.url));
    const [held] = await queues.addBulk('vip', [{ name: 'job', payload: { holdOnAttempt: 1 }, opts: { group: 'k' } }]);
    await waitFor(
      async () => (await sql.query(`SELECT 1 FROM pgqueue.jobs WHERE id = $1 AND state = 'active'`, [held.id])).rowCount === 1,
      { timeoutMs: 20_000, message: 'the holding job to start' },
    );
    const { rows } = await sql.query<{ locked_by: string }>(`SELECT locked_by FROM pgqueue.jobs WHERE id = $1`, [held.id]);
    const holder = started.find((w) => rows[0].locked_by.includes(`:${w.proc.pid}:`))!;
    const [next] = await queues.addBulk('vip', [{ name: 'job', payload: { ms: 1 }, opts: { group: 'k' } }]);
    // While the holder lives, group k's one slot is taken: the next job waits.
    expect((await sql.query(`SELECT state FROM pgqueue.jobs WHERE id = $1`, [next.id])).rows[0].state).toBe('waiting');
    holder.proc.kill('SIGKILL');
    // Its lease runs out (3 s), another node's rescuer returns the job, it runs again (not held
    // on attempt 2), and then the next job of the group.
    await waitFor(
      async () =>
        (
          await sql.query(`SELECT 1 FROM pgqueue.job_history WHERE id = ANY($1::bigint[]) AND state = 'completed'`, [
            [held.id, next.id],
          ])
        ).rowCount === 2,
      { timeoutMs: 60_000, intervalMs: 200, message: 'both jobs of group k to complete after the SIGKILL' },
    );
  }, 90_000);
});
