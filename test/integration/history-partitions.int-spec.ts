import 'reflect-metadata';
import { Client, type Pool } from 'pg';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { migrate } from '../../lib/db/migrator';
import { HistoryPartitions } from '../../lib/db/history/partitions';
import { HistoryLayoutCache } from '../../lib/db/history/by-id';
import { poolExecutor } from '../../lib/db/executor';
import { JobStore } from '../../lib/db/job-store';
import { readStatements } from '../../lib/db/reads';
import { lockKey } from '../../lib/db/transaction';
import { DashboardStore } from '../../lib/db/dashboard-store';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const D = 86_400_000;

@Processor('parts')
class PartsProcessor {
  @Process()
  run(job: Job<{ fail?: boolean }>) {
    if (job.payload.fail) throw new Error('boom');
    return 'ok';
  }
}

/** Inserts one finished job straight into the history; returns its id. */
async function finished(pool: Pool, schema: string, id: number, state: string, finishedAt: Date): Promise<string> {
  await pool.query(
    `INSERT INTO ${schema}.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
     VALUES ($1, 'parts', 'x', '{}', $2, 0, $3, 1, 1, '[]', $3, $3)`,
    [id, state, finishedAt],
  );
  return String(id);
}

async function whereIs(pool: Pool, schema: string, id: string): Promise<string | null> {
  const { rows } = await pool.query(`SELECT tableoid::regclass::text AS t FROM ${schema}.job_history WHERE id = $1`, [id]);
  return rows[0]?.t ?? null;
}

async function dbNow(pool: Pool): Promise<number> {
  return (await pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n;
}

/** A migrated schema, a store on it that keeps finished jobs 30 days, and its daily partitions. */
async function historyIn(pool: Pool, schema: string): Promise<{ store: JobStore; parts: HistoryPartitions }> {
  await migrate(pool, schema);
  const store = new JobStore(pool, {
    schema,
    retention: { completedMs: 30 * D, cancelledMs: 30 * D, failedMs: null },
    asyncCommit: false,
    preparedStatements: true,
  });
  return { store, parts: new HistoryPartitions(pool, schema, D) };
}

describe('history partitions', () => {
  const t = useTestDatabase();

  it('a fresh schema: failed jobs in their own partition, others in the default until their partition exists, then moved into it', async () => {
    await migrate(t.pool, 'fresh');
    const store = new JobStore(t.pool, {
      schema: 'fresh',
      retention: { completedMs: D, cancelledMs: D, failedMs: null },
      asyncCommit: false,
      preparedStatements: false,
    });
    const now = new Date(await dbNow(t.pool));
    const done = await finished(t.pool, 'fresh', 1, 'completed', now);
    const failed = await finished(t.pool, 'fresh', 2, 'failed', now);
    expect(await whereIs(t.pool, 'fresh', done)).toBe('fresh.job_history_done_default');
    expect(await whereIs(t.pool, 'fresh', failed)).toBe('fresh.job_history_failed');

    const parts = new HistoryPartitions(t.pool, 'fresh', D);
    // At the instant the rows finished, not the database's clock of the pass: a run across
    // midnight would otherwise create tomorrow's partitions and leave today's rows in the default.
    const r = await parts.runOnce(D, now.getTime());
    expect(r.created).toHaveLength(3);
    const today = `fresh.job_history_p${now.toISOString().slice(0, 10).replace(/-/g, '')}t0000`;
    expect(await whereIs(t.pool, 'fresh', done)).toBe(today);
    expect((await store.getJob(done))?.state).toBe('completed');
    expect((await store.getJob(failed))?.state).toBe('failed');
    // Every new partition has the parent's indexes and its own id index.
    const { rows } = await t.pool.query(
      `SELECT regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', '') AS i FROM pg_index WHERE indrelid = $1::regclass ORDER BY 1`,
      [today],
    );
    expect(rows.map((x) => x.i)).toEqual(
      [
        'btree (id)',
        "btree (queue) WHERE (state = 'cancelled'::text)",
        "btree (queue) WHERE (state = 'failed'::text)",
        'btree (queue, state, id)',
        // Not (state, finished_at) since version 11: the throughput's finish times, nearly nothing per row.
        "brin (finished_at) WITH (autosummarize='on')",
      ].sort(),
    );
    expect((await parts.runOnce(D, now.getTime())).created).toEqual([]);
  });

  it('retention drops whole partitions past it; failed jobs of those days stay; a reader makes the drop give up after lock_timeout', async () => {
    await migrate(t.pool, 'drops');
    const store = new JobStore(t.pool, {
      schema: 'drops',
      retention: { completedMs: D, cancelledMs: D, failedMs: null },
      asyncCommit: false,
      preparedStatements: false,
    });
    const parts = new HistoryPartitions(t.pool, 'drops', D);
    const now = await dbNow(t.pool);
    // Partitions for five days ago and the two after it, as if maintenance had run then.
    expect((await parts.runOnce(D, now - 5 * D)).created).toHaveLength(3);
    const old = new Date(now - 5 * D);
    const oldDone = await finished(t.pool, 'drops', 10, 'completed', old);
    const oldCancelled = await finished(t.pool, 'drops', 11, 'cancelled', old);
    const oldFailed = await finished(t.pool, 'drops', 12, 'failed', old);
    const recent = await finished(t.pool, 'drops', 13, 'completed', new Date(now - 60_000));

    // A report reading the history holds a lock the drop needs: the drop waits 200 ms, gives up.
    const reader = await t.pool.connect();
    try {
      await reader.query('BEGIN');
      await reader.query('SELECT count(*) FROM drops.job_history');
      const blocked = await parts.runOnce(D, now);
      expect(blocked.dropped).toEqual([]);
      expect(blocked.lockTimeouts).toBeGreaterThan(0);
    } finally {
      await reader.query('ROLLBACK');
      reader.release();
    }
    expect((await store.getJob(oldDone))?.state).toBe('completed');

    const r = await parts.runOnce(D, now);
    expect(r.dropped).toHaveLength(3);
    expect(await store.getJob(oldDone)).toBeNull();
    expect(await store.getJob(oldCancelled)).toBeNull();
    expect((await store.getJob(oldFailed))?.state).toBe('failed');
    expect((await store.getJob(recent))?.state).toBe('completed');
  });

  it('lookups by id visit only the closed partitions whose id range holds the id, and find every job', async () => {
    const { store, parts } = await historyIn(t.pool, 'bounds');
    const now = await dbNow(t.pool);
    for (const k of [6, 0]) await parts.runOnce(30 * D, now - k * D);
    // Partitions for days -6 to -4 (closed: they ended days ago) and today on; days -3 to -1
    // have none (maintenance lapsed), so their rows sit in the default partition, as do those
    // of day -8. Day -6: ids 100-199, and 5 (enqueued long before it finished); day -5:
    // 200-299; day -4: none. Failed jobs have their own partition, whatever their day.
    const day = (k: number, i: number) => new Date(Math.floor((now - k * D) / D) * D + 1000 * i);
    const leaf = (k: number) => `job_history_p${day(k, 0).toISOString().slice(0, 10).replace(/-/g, '')}t0000`;
    for (let i = 100; i < 200; i++) await finished(t.pool, 'bounds', i, 'completed', day(6, i));
    await finished(t.pool, 'bounds', 5, 'completed', day(6, 5));
    for (let i = 200; i < 300; i++) await finished(t.pool, 'bounds', i, 'cancelled', day(5, i));
    await finished(t.pool, 'bounds', 150_000, 'failed', day(6, 7));
    await finished(t.pool, 'bounds', 50, 'completed', day(8, 1));
    await finished(t.pool, 'bounds', 400, 'completed', day(2, 1));
    await finished(t.pool, 'bounds', 500, 'completed', new Date(now - 1000));
    expect(await whereIs(t.pool, 'bounds', '50')).toBe('bounds.job_history_done_default');
    expect(await whereIs(t.pool, 'bounds', '400')).toBe('bounds.job_history_done_default');

    expect(await parts.recordIdBounds()).toEqual([leaf(6), leaf(5), leaf(4)]);
    expect(await parts.recordIdBounds()).toEqual([]);
    const { rows: bounds } = await t.pool.query(
      `SELECT partition, min_id::int AS lo, max_id::int AS hi FROM bounds.job_history_id_bounds ORDER BY lo NULLS LAST, partition`,
    );
    expect(bounds.map((b) => [b.partition, b.lo, b.hi])).toEqual([
      [leaf(6), 5, 199],
      [leaf(5), 200, 299],
      [leaf(4), null, null],
    ]);

    for (const [id, state] of [
      ['5', 'completed'],
      ['50', 'completed'],
      ['150', 'completed'],
      ['250', 'cancelled'],
      ['150000', 'failed'],
      ['400', 'completed'],
      ['500', 'completed'],
    ]) {
      expect(await store.getJob(id)).toMatchObject({ id, state });
    }
    expect(await store.getJob('350')).toBeNull();
    // The job page and a parent's children read the same way (children per child, in one statement).
    const dashboard = new DashboardStore(t.pool, 'bounds', 'bounds_jobs');
    expect(await dashboard.job('150')).toMatchObject({ id: '150', state: 'completed', history: true });
    expect(await dashboard.job('350')).toBeNull();
    await t.pool.query(
      `INSERT INTO bounds.job_dependencies (child_id, parent_id, state) VALUES (5, 9999, NULL), (250, 9999, NULL), (150000, 9999, NULL), (400, 9999, NULL), (350, 9999, 'removed')`,
    );
    expect((await store.flows.children('9999', null)).map((c) => [c.id, c.state, c.queue])).toEqual([
      ['5', 'completed', 'parts'],
      ['250', 'cancelled', 'parts'],
      ['350', 'removed', null],
      ['400', 'completed', 'parts'],
      ['150000', 'failed', 'parts'],
    ]);
    // The plan: of the closed partitions, only the one whose range holds the id is read.
    const { sql, values } = await new HistoryLayoutCache(poolExecutor(t.pool), 'bounds').lookup(
      readStatements('bounds').getJobIn,
      '250',
    );
    const plan = (await t.pool.query(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${sql}`, values)).rows
      .map((r) => r['QUERY PLAN'] as string)
      .join('\n');
    const read = [...plan.matchAll(/on (job_history_p\d+t0000) \S+ \(actual rows/g)].map((m) => m[1]);
    const closedNames = bounds.map((b) => b.partition as string);
    expect(read.filter((n) => closedNames.includes(n))).toEqual([bounds[1].partition]);

    // Dropping a partition past retention forgets its range.
    const dayStart = Math.floor(now / D) * D;
    const dropped = await parts.runOnce(now - (dayStart - 5 * D), now);
    expect(dropped.dropped).toEqual([leaf(6)]);
    const left = await t.pool.query(`SELECT partition FROM bounds.job_history_id_bounds`);
    expect(left.rows.map((r) => r.partition)).not.toContain(bounds[0].partition);
    expect(await store.getJob('150')).toBeNull();
    expect((await store.getJob('250'))?.state).toBe('cancelled');
  });

  it('a pass reads the recorded id ranges only while a partition is left to record, and records a partition dropped and made again', async () => {
    await historyIn(t.pool, 'memo');
    const now = await dbNow(t.pool);
    const setup = new HistoryPartitions(t.pool, 'memo', D);
    // Days -4 to -2 (closed: they ended over an hour ago), and today on.
    for (const k of [4, 0]) await setup.runOnce(30 * D, now - k * D);
    const leaf = (k: number) =>
      `job_history_p${new Date(Math.floor((now - k * D) / D) * D).toISOString().slice(0, 10).replace(/-/g, '')}t0000`;
    // The pass's own reads, counted on their way to the real pool.
    const sent: string[] = [];
    const counted = {
      query: (config: unknown, values?: unknown[]) => {
        sent.push(typeof config === 'string' ? config : String((config as { text: string }).text));
        return t.pool.query(config as string, values);
      },
      connect: () => t.pool.connect(),
      end: () => Promise.resolve(),
      on: () => counted,
    };
    const parts = new HistoryPartitions(counted as unknown as Pool, 'memo', D);
    expect((await parts.runOnce(30 * D)).closed).toEqual([leaf(4), leaf(3), leaf(2)]);
    expect(sent.some((q) => q.includes('pg_stat_activity'))).toBe(true);

    sent.length = 0;
    expect((await parts.runOnce(30 * D)).closed).toEqual([]);
    // The layout and the partitions: nothing of the recorded ranges nor of open transactions.
    expect(sent).toHaveLength(2);
    expect(sent.filter((q) => q.includes('job_history_id_bounds') && !q.includes('to_regclass'))).toEqual([]);

    // Day -3 dropped and made again under its name (its range forgotten with it): a new table,
    // whose range the next pass records, or lookups by id would pass over its rows.
    await t.pool.query(`ALTER TABLE memo.job_history_done DETACH PARTITION memo.${leaf(3)}`);
    await t.pool.query(`DROP TABLE memo.${leaf(3)}`);
    await t.pool.query(`DELETE FROM memo.job_history_id_bounds WHERE partition = $1`, [leaf(3)]);
    const lo = Math.floor((now - 3 * D) / D) * D;
    expect(await setup.createPartition(leaf(3), lo, lo + D)).toBe(true);
    expect((await parts.runOnce(30 * D)).closed).toEqual([leaf(3)]);
    const { rows } = await t.pool.query(`SELECT partition FROM memo.job_history_id_bounds ORDER BY partition`);
    expect(rows.map((r) => r.partition)).toEqual([leaf(4), leaf(3), leaf(2)].sort());
  });

  it('a row written into a closed partition outside its recorded id range is still found by id (getJob, the job page, childResults)', async () => {
    // What a transaction of another role (hidden from pg_stat_activity), open for over an hour
    // across the partition's end, could do: its history row is stamped with its start.
    const { store, parts } = await historyIn(t.pool, 'late');
    const now = await dbNow(t.pool);
    for (const k of [3, 0]) await parts.runOnce(30 * D, now - k * D);
    const day3 = new Date(Math.floor((now - 3 * D) / D) * D + 1000);
    for (let i = 100; i < 110; i++) await finished(t.pool, 'late', i, 'completed', day3);
    expect((await parts.recordIdBounds()).length).toBeGreaterThan(0);
    const late = await finished(t.pool, 'late', 9000, 'completed', day3);
    expect(await whereIs(t.pool, 'late', late)).toMatch(/^late\.job_history_p\d+t0000$/);
    const { rows } = await t.pool.query(
      `SELECT min_id::int AS lo, max_id::int AS hi FROM late.job_history_id_bounds WHERE min_id IS NOT NULL`,
    );
    expect(rows).toEqual([{ lo: 100, hi: 109 }]);

    expect(await store.getJob(late)).toMatchObject({ id: late, state: 'completed' });
    expect(await store.getJob('105')).toMatchObject({ id: '105', state: 'completed' });
    expect(await store.getJob('9001')).toBeNull();
    expect(await new DashboardStore(t.pool, 'late', 'late_jobs').job(late)).toMatchObject({ id: late, history: true });
    await t.pool.query(
      `INSERT INTO late.job_dependencies (child_id, parent_id, state) VALUES (105, 7777, NULL), (9000, 7777, NULL)`,
    );
    expect((await store.flows.children('7777', null)).map((c) => [c.id, c.state, c.queue])).toEqual([
      ['105', 'completed', 'parts'],
      ['9000', 'completed', 'parts'],
    ]);
  });

  it('a booting node waits for the history lock another node holds, then creates what is still missing', async () => {
    // Two nodes booting at once once each skipped the step the other held and left a partition
    // between them uncreated: at boot the lock is waited for, not tried.
    const { parts } = await historyIn(t.pool, 'wait_parts');
    // One instant for both calls: the second must find nothing missing even if midnight passed.
    const now = await dbNow(t.pool);
    const holder = await t.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock($1::bigint)`, [lockKey('nestjs-pg-queue:history:wait_parts')]);
      let answered = false;
      const boot = parts.ensureAhead(now).finally(() => (answered = true));
      // A session waits on the advisory lock: a try-lock never waits (it answers []). Asked on a
      // connection of its own: the holder and the boot may have taken the pool's.
      const waitsOnLock = async () =>
        (
          await withClient(t.db.url, (c) =>
            c.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`,
            ),
          )
        ).rows[0].n === 1;
      await waitFor(waitsOnLock, { message: () => `ensureAhead to wait on the history lock (answered: ${answered})` });
      expect(answered).toBe(false);
      await holder.query('COMMIT');
      expect(await boot).toHaveLength(3);
    } finally {
      holder.release();
    }
    const { rows } = await t.pool.query(
      `SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'wait_parts.job_history_done'::regclass`,
    );
    expect(rows[0].n).toBe(4);
    expect(await parts.ensureAhead(now)).toEqual([]);
  });

  it('every boot creates the partitions for now and ahead before it answers, even with no workers; at once on two nodes', async () => {
    // A cancel right after the first boot once raced the first maintenance pass's ATTACH and
    // failed its partition check in the default partition: at boot nothing must route there.
    const boot = () =>
      bootApp({ options: { connection: t.db.url, schema: 'boot_parts', workers: false }, queues: [{ name: 'parts' }] });
    const before = await dbNow(t.pool);
    const apps = await Promise.all([boot(), boot()]);
    try {
      const after = await dbNow(t.pool);
      const { rows } = await t.pool.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'boot_parts.job_history_done'::regclass ORDER BY 1`,
      );
      const names = rows.map((r) => r.name);
      // No wait for a pass: the default partition, and each boot's day (by the database's clock
      // when it booted, between before and after) with the two after it. Two boots either side
      // of midnight may have made four days; any run makes at least these three.
      const dayOf = (ms: number) => `job_history_p${new Date(ms).toISOString().slice(0, 10).replace(/-/g, '')}t0000`;
      const ranged = names.filter((n) => n !== 'job_history_done_default');
      expect(names).toContain('job_history_done_default');
      expect(ranged).toEqual(expect.arrayContaining([dayOf(after), dayOf(before + D), dayOf(before + 2 * D)]));
      expect(ranged.filter((n) => ![0, 1, 2, 3].some((k) => dayOf(before + k * D) === n))).toEqual([]);
      const sameDay = dayOf(before) === dayOf(after);
      if (sameDay) expect(ranged).toHaveLength(3);
      const queue = apps[0].get(QueueService).getQueue('parts');
      const job = await queue.add('x', {}, { delayMs: 60_000 });
      expect(await queue.cancel(job.id)).toBe('cancelled');
      expect(await whereIs(t.pool, 'boot_parts', job.id)).toMatch(/^boot_parts\.job_history_p\d{8}t0000$/);
      if (sameDay) expect(await new HistoryPartitions(t.pool, 'boot_parts', D).ensureAhead(before)).toEqual([]);
    } finally {
      await Promise.all(apps.map((a) => a.close()));
    }
  });

  it('the maintenance pass of a running app keeps partitions ahead, and finished jobs land in them', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'app_parts', rescueIntervalMs: 200, pollIntervalMs: 100 },
      queues: [{ name: 'parts' }],
      providers: [PartsProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const count = async () =>
        (
          await t.pool.query(
            `SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'app_parts.job_history_done'::regclass`,
          )
        ).rows[0].n;
      // At least: a pass across midnight may already have made the next day's.
      await waitFor(async () => (await count()) >= 4, { message: 'three partitions and the default' });
      const ok = await queues.add('parts', 'x', {});
      const bad = await queues.add('parts', 'x', { fail: true }, { attempts: 1 });
      await waitFor(async () => (await queues.getJob(ok.id))?.state === 'completed');
      await waitFor(async () => (await queues.getJob(bad.id))?.state === 'failed');
      expect(await whereIs(t.pool, 'app_parts', ok.id)).toMatch(/^app_parts\.job_history_p\d{8}t0000$/);
      expect(await whereIs(t.pool, 'app_parts', bad.id)).toBe('app_parts.job_history_failed');
      // Redrive from the failed partition: back to waiting under its id, fails again, lands there again.
      expect(await queues.getQueue('parts').retry(bad.id)).toBe(true);
      await waitFor(async () => (await queues.getJob(bad.id))?.errors.length === 2);
      expect(await whereIs(t.pool, 'app_parts', bad.id)).toBe('app_parts.job_history_failed');
    } finally {
      await app.close();
    }
  });
});
