import { DashboardBusyError } from '../../lib/core/dashboard-reads';
import { MAX_WAITING } from '../../lib/db/dashboard/executor';
import { MAX_NAMES, MAX_ROWS } from '../../lib/db/dashboard-queries';
import { DashboardStore } from '../../lib/db/dashboard-store';
import { migrate } from '../../lib/db/migrator';
import { testPool, useTestDatabase } from '../support/database';

// What the dashboard's reads may cost the database, on real PostgreSQL: the queue page's job
// names come from the state indexes (never a scan of jobs), and the statements waiting their
// turn and every list are capped. statement_timeout over HTTP: test/integration/dashboard-api.int-spec.ts.

const ctx = useTestDatabase();

beforeAll(async () => {
  await migrate(ctx.pool, 'pgqueue');
});

/** Every node of a JSON plan, depth first. */
function nodes(plan: Record<string, unknown>): Record<string, unknown>[] {
  return [plan, ...((plan.Plans as Record<string, unknown>[] | undefined) ?? []).flatMap(nodes)];
}

describe('dashboard reads', () => {
  it('the queue page names: no sequential scan of jobs, even where one would be the cheapest plan', async () => {
    await ctx.pool.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload, state, locked_by, locked_until, attempt)
       SELECT 'busy', 'n' || (g % 7), '{}', CASE WHEN g % 50 = 0 THEN 'active' ELSE 'waiting' END,
              CASE WHEN g % 50 = 0 THEN 'node' END, CASE WHEN g % 50 = 0 THEN now() + interval '1 minute' END,
              (g % 50 = 0)::int
       FROM generate_series(1, 20000) g`,
    );
    await ctx.pool.query(`INSERT INTO pgqueue.jobs (queue, name, payload) VALUES ('quiet', 'only', '{}')`);
    await ctx.pool.query('ANALYZE pgqueue.jobs');
    const store = new DashboardStore(ctx.pool, 'pgqueue', 'pgqueue_jobs');
    expect(await store.names('quiet')).toEqual(['only']);
    expect(await store.names('busy')).toEqual(['n0', 'n1', 'n2', 'n3', 'n4', 'n5', 'n6']);
    const c = await ctx.pool.connect();
    try {
      // Seq scans allowed: the planner takes one only where no index serves the read.
      const {
        rows: [{ 'QUERY PLAN': plan }],
      } = await c.query(`EXPLAIN (FORMAT JSON) ${store.q.names}`, ['quiet']);
      const scans = nodes((plan as { Plan: Record<string, unknown> }[])[0].Plan)
        .filter((n) => n['Relation Name'] === 'jobs')
        .map((n) => n['Node Type']);
      expect(scans.length).toBeGreaterThan(0);
      expect(scans).not.toContain('Seq Scan');
    } finally {
      c.release();
    }
  });

  it(`every list is capped: ${MAX_NAMES} job names, ${MAX_ROWS} queues, nodes and schedules`, async () => {
    const over = 1200;
    await ctx.pool.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload) SELECT 'many', 'm' || lpad(g::text, 4, '0'), '{}' FROM generate_series(1, $1::int) g`,
      [over],
    );
    await ctx.pool.query(
      `INSERT INTO pgqueue.nodes (id, host, pid, started_at, heartbeat_ms)
       SELECT 'node-' || g, 'host', g, now(), 60000 FROM generate_series(1, $1::int) g`,
      [over],
    );
    await ctx.pool.query(
      `INSERT INTO pgqueue.job_schedulers (queue, id, every_ms, job_name, payload, next_run_at)
       SELECT 'q', 's' || g, 60000, 'tick', '{}', now() + interval '1 hour' FROM generate_series(1, $1::int) g`,
      [over],
    );
    const store = new DashboardStore(ctx.pool, 'pgqueue', 'pgqueue_jobs');
    const names = await store.names('many');
    expect([names.length, names[0], names[MAX_NAMES - 1]]).toEqual([
      MAX_NAMES,
      'm0001',
      `m${String(MAX_NAMES).padStart(4, '0')}`,
    ]);
    const registered = Array.from({ length: over }, (_, i) => `q${String(i).padStart(4, '0')}`);
    // The statement itself (counts() also slices its merge with the history's queues).
    expect((await ctx.pool.query(store.q.liveCounts, [registered, null])).rowCount).toBe(MAX_ROWS);
    expect((await store.counts(registered)).length).toBe(MAX_ROWS);
    expect((await store.nodes()).length).toBe(MAX_ROWS);
    expect((await store.schedulers()).length).toBe(MAX_ROWS);
  });

  it(`at most ${MAX_WAITING} statements wait for a turn; the next is refused at once, the others run`, async () => {
    const pool = testPool(ctx.db.url, 3);
    const holder = await ctx.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(4242)');
      // One turn: the first read blocks on the lock, the next MAX_WAITING wait for the turn.
      const store = new DashboardStore(pool, 'pgqueue', 'pgqueue_jobs', 1, 60_000);
      const exec = (store as unknown as { db: { query(sql: string, p: unknown[]): Promise<unknown[]> } }).db;
      const blocked = exec.query('SELECT pg_advisory_lock_shared(4242), pg_advisory_unlock_shared(4242)', []);
      const waiting = Array.from({ length: MAX_WAITING }, () => exec.query('SELECT 1 AS one', []));
      await expect(exec.query('SELECT 1 AS one', [])).rejects.toThrow(DashboardBusyError);
      await holder.query('SELECT pg_advisory_unlock(4242)');
      await blocked;
      expect(await Promise.all(waiting)).toHaveLength(MAX_WAITING);
      expect(await exec.query('SELECT 1 AS one', [])).toEqual([{ one: 1 }]);
    } finally {
      holder.release();
      await pool.end();
    }
  });
});
