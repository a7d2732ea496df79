import 'reflect-metadata';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { pgQueueMigrations } from '../../lib';
import { applyMigration, loadMigrations, migrate } from '../../lib/db/migrator';
import { clientExecutor } from '../../lib/db/executor';
import { HistoryPartitions } from '../../lib/db/history/partitions';
import { JobStore } from '../../lib/db/job-store';
import { useTestDatabase } from '../support/database';

const D = 86_400_000;
const ROWS = 1_000_000;

/** The schema as an install from before version 10 has it. */
async function migrateBefore10(pool: Pool, schema: string): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    for (const m of loadMigrations().filter((x) => x.version < 10)) await applyMigration(clientExecutor(c), schema, m);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

/**
 * Version 12's logs column (catalog-only ALTERs: no row read), which the library's rescue and
 * outcome statements name: the maintenance passes below run today's statements on a schema of
 * version 10 or 11.
 */
async function addLogsColumn(pool: Pool, schema: string): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await applyMigration(
      clientExecutor(c),
      schema,
      loadMigrations().find((x) => x.version === 12)!,
    );
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

/** `rows` finished jobs over the last 2,000 minutes, every 100th failed, ids 1..rows. */
async function fillHistory(pool: Pool, schema: string, rows: number): Promise<void> {
  await pool.query(
    `INSERT INTO ${schema}.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, result, created_at, started_at, finished_at)
     SELECT g, 'old', 'x', jsonb_build_object('n', g), CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'completed' END, 0,
            now() - interval '3 days', 1, 1, '[]', '"ok"', now() - interval '3 days', now() - interval '3 days',
            now() - (g % 2000) * interval '1 minute'
     FROM generate_series(1, $1) g`,
    [rows],
  );
  await pool.query(`ANALYZE ${schema}.job_history`);
}

/** Rows this transaction has read from the table so far (its own pending statistics). */
async function rowsRead(c: PoolClient, oid: number): Promise<number> {
  const { rows } = await c.query(
    `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relid = $1`,
    [oid],
  );
  return Number(rows[0]?.n ?? 0);
}

async function strongLocks(pool: Pool, pid: number): Promise<string[]> {
  const { rows } = await pool.query(
    `SELECT c.relname || ' ' || l.mode AS l FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
     WHERE l.pid = $1 AND c.relname LIKE 'job_history%' ORDER BY 1`,
    [pid],
  );
  return rows.map((r) => r.l);
}

describe('migrating a big history to partitions (version 10)', () => {
  const t = useTestDatabase();
  jest.setTimeout(300_000);

  it(`${ROWS.toLocaleString('en')} rows: the migration reads none, the one scan runs under a lock that lets reads and writes go on, and every row is still there`, async () => {
    await migrateBefore10(t.pool, 'big');
    await fillHistory(t.pool, 'big', ROWS);
    const oid = Number((await t.pool.query(`SELECT 'big.job_history'::regclass::oid AS o`)).rows[0].o);
    const store = new JobStore(t.pool, {
      schema: 'big',
      retention: { completedMs: D, cancelledMs: D, failedMs: null },
      asyncCommit: false,
      preparedStatements: false,
    });

    // The migration, in one transaction as the migrator runs it: catalog-only.
    const c = await t.pool.connect();
    try {
      await c.query('BEGIN');
      const before = await rowsRead(c, oid);
      expect(
        await applyMigration(
          clientExecutor(c),
          'big',
          loadMigrations().find((m) => m.version === 10)!,
        ),
      ).toBe(true);
      // One row: the emptiness probe (NOT EXISTS) of the old table.
      expect((await rowsRead(c, oid)) - before).toBeLessThanOrEqual(1);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    const layout = await t.pool.query(
      `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_class c WHERE c.oid = $1`,
      [oid],
    );
    expect(layout.rows[0]).toEqual({ relname: 'job_history_legacy', bound: 'FOR VALUES FROM (MINVALUE) TO (MAXVALUE)' });

    // Narrowing it: the CHECK, then its validation held open while others read, insert and delete.
    const parts = new HistoryPartitions(t.pool, 'big', D);
    const now = Number((await t.pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n);
    expect(await parts.addLegacyBound(now)).toBe(true);
    const v = await t.pool.connect();
    try {
      await v.query('BEGIN');
      await parts.validateLegacyBound(v);
      const pid = (await v.query('SELECT pg_backend_pid() AS p')).rows[0].p;
      expect(await strongLocks(t.pool, pid)).toEqual(['job_history_legacy ShareUpdateExclusiveLock']);
      const other = await t.pool.connect();
      try {
        await other.query('BEGIN');
        await other.query(`SELECT set_config('lock_timeout', '2s', true)`);
        await other.query(
          `INSERT INTO big.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at)
           VALUES ($1, 'old', 'x', '{}', 'completed', 0, now(), 1, 1, '[]', now())`,
          [ROWS + 1],
        );
        expect(
          (await other.query(`SELECT count(*)::int AS n FROM big.job_history WHERE id IN (7, $1)`, [ROWS + 1])).rows[0].n,
        ).toBe(2);
        await other.query(`DELETE FROM big.job_history WHERE id = 3`);
        await other.query('COMMIT');
      } finally {
        other.release();
      }
      await v.query('COMMIT');
    } finally {
      v.release();
    }

    // The swap: catalog-only, it reads no row of the old table.
    const bound = (await parts.legacyBound())!;
    expect(bound.valid).toBe(true);
    const s = await t.pool.connect();
    try {
      await s.query('BEGIN');
      const before = await rowsRead(s, oid);
      await parts.swapLegacy(s, new Date(bound.bound).toISOString());
      expect((await rowsRead(s, oid)) - before).toBe(0);
      await s.query('COMMIT');
    } finally {
      s.release();
    }
    const after = await parts.runOnce(D);
    expect(after.converted).toBeNull();
    expect(after.created.length).toBeGreaterThan(0);

    // Nothing lost: every id, every state, and getJob reads them.
    const all = await t.pool.query(
      `SELECT count(*)::int AS n, sum(id)::text AS ids, count(*) FILTER (WHERE state = 'failed')::int AS failed FROM big.job_history`,
    );
    const n = ROWS; // minus id 3 deleted above, plus ROWS + 1 inserted
    expect(all.rows[0]).toEqual({ n, ids: String((n * (n + 1)) / 2 - 3 + n + 1), failed: ROWS / 100 });
    for (const id of ['1', '100', '500000', String(ROWS), String(ROWS + 1)]) {
      const job = await store.getJob(id);
      expect(job).toMatchObject({ id, queue: 'old', state: Number(id) % 100 === 0 ? 'failed' : 'completed' });
    }
    expect(await store.getJob('3')).toBeNull();
    const { rows } = await t.pool.query(
      `SELECT count(*)::int AS n FROM big.job_history h WHERE h.tableoid <> 'big.job_history_legacy'::regclass`,
    );
    expect(rows[0].n).toBe(0);

    // Retention goes on in batches in the old table (its rows are older than any partition), failed jobs kept.
    await addLogsColumn(t.pool, 'big');
    const pass = await store.maintain(1000);
    expect(pass?.pruned).toBe(1000);
    expect((await t.pool.query(`SELECT count(*)::int AS n FROM big.job_history WHERE state = 'failed'`)).rows[0].n).toBe(
      ROWS / 100,
    );

    // Version 11 on that history: the (state, finished_at) index leaves the parent but stays on
    // the old table (re-attached without reading a row), the failed and default partitions.
    const legacyOid = oid;
    const m = await t.pool.connect();
    try {
      await m.query('BEGIN');
      const before = await rowsRead(m, legacyOid);
      expect(
        await applyMigration(
          clientExecutor(m),
          'big',
          loadMigrations().find((x) => x.version === 11)!,
        ),
      ).toBe(true);
      expect((await rowsRead(m, legacyOid)) - before).toBe(0);
      await m.query('COMMIT');
    } finally {
      m.release();
    }
    const indexes = async (table: string): Promise<string[]> =>
      (
        await t.pool.query(
          `SELECT regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', '') AS i FROM pg_index
           WHERE indrelid = $1::regclass ORDER BY 1`,
          [`big.${table}`],
        )
      ).rows.map((r) => r.i);
    for (const table of ['job_history_legacy', 'job_history_failed', 'job_history_done_default']) {
      expect((await indexes(table)).filter((i) => i === 'btree (state, finished_at)')).toHaveLength(1);
    }
    expect(await indexes('job_history')).not.toContain('btree (state, finished_at)');
    const leaf = (await parts.partitions()).list.at(-1)!.name;
    expect(await indexes(leaf)).not.toContain('btree (state, finished_at)');
    expect(await indexes(leaf)).toContain("brin (finished_at) WITH (autosummarize='on')");
    expect(
      (await t.pool.query(`SELECT count(*)::int AS n FROM pg_inherits WHERE inhrelid = 'big.job_history_legacy'::regclass`))
        .rows[0].n,
    ).toBe(1);
    // Every row still there, and found by id with the statement of the partitioned layout.
    const store11 = new JobStore(t.pool, {
      schema: 'big',
      retention: { completedMs: D, cancelledMs: D, failedMs: null },
      asyncCommit: false,
      preparedStatements: true,
    });
    for (const id of ['100', '500000', String(ROWS), String(ROWS + 1)]) {
      expect(await store11.getJob(id)).toMatchObject({ id, state: Number(id) % 100 === 0 ? 'failed' : 'completed' });
    }
    expect((await store11.maintain(1000))?.pruned).toBe(1000);
    expect((await parts.runOnce(D)).created).toEqual([]);
  });

  it(`version 11 on a partitioned history of ${ROWS.toLocaleString('en')} rows: the ranged partitions lose their (state, finished_at) btree, the failed and default ones keep it, every row is found`, async () => {
    const c = await t.pool.connect();
    try {
      await c.query('BEGIN');
      for (const m of loadMigrations().filter((x) => x.version < 11)) await applyMigration(clientExecutor(c), 'v10', m);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    const parts = new HistoryPartitions(t.pool, 'v10', D);
    const now = Number((await t.pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n);
    await parts.runOnce(30 * D, now - 2 * D);
    await parts.runOnce(30 * D, now);
    await fillHistory(t.pool, 'v10', ROWS);
    // The partitions as version 10 made them: without the BRIN index this build adds to new ones.
    await t.pool.query(`DO $$ DECLARE r record; BEGIN
      FOR r IN SELECT indexrelid::regclass AS i FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
               WHERE c.relnamespace = 'v10'::regnamespace AND c.relname LIKE '%\\_finished\\_idx' LOOP
        EXECUTE format('DROP INDEX %s', r.i);
      END LOOP; END $$`);
    const m = await t.pool.connect();
    let ms: number;
    try {
      await m.query('BEGIN');
      const t0 = performance.now();
      expect(
        await applyMigration(
          clientExecutor(m),
          'v10',
          loadMigrations().find((x) => x.version === 11)!,
        ),
      ).toBe(true);
      ms = performance.now() - t0;
      await m.query('COMMIT');
    } finally {
      m.release();
    }
    process.stderr.write(`[history-migration] version 11 over ${ROWS} rows (1 % failed): ${ms.toFixed(0)} ms\n`);
    const { rows } = await t.pool.query(
      `SELECT c.relname AS t, count(*) FILTER (WHERE pg_get_indexdef(x.indexrelid) LIKE '%btree (state, finished_at)')::int AS btree,
              count(*) FILTER (WHERE pg_get_indexdef(x.indexrelid) LIKE '%brin (finished_at)%')::int AS brin
       FROM pg_partition_tree('v10.job_history') p JOIN pg_class c ON c.oid = p.relid JOIN pg_index x ON x.indrelid = c.oid
       WHERE p.isleaf GROUP BY 1 ORDER BY 1`,
    );
    // BRIN on the partitions the throughput can read (ending within the last hour, or later);
    // older ones, never read by finish time any more, get no index in their place.
    const ends = new Map((await parts.partitions()).list.map((p) => [p.name, p.hi]));
    for (const r of rows) {
      const keeps = r.t === 'job_history_failed' || r.t === 'job_history_done_default';
      const recent = (ends.get(r.t) ?? 0) > now - 3_600_000;
      expect(r).toEqual({ t: r.t, btree: keeps ? 1 : 0, brin: recent ? 1 : 0 });
    }
    expect((await t.pool.query(`SELECT count(*)::int AS n FROM v10.job_history`)).rows[0].n).toBe(ROWS);
    const store = new JobStore(t.pool, {
      schema: 'v10',
      retention: { completedMs: 30 * D, cancelledMs: 30 * D, failedMs: null },
      asyncCommit: false,
      preparedStatements: true,
    });
    expect((await parts.recordIdBounds()).length).toBeGreaterThan(0);
    for (const id of ['1', '100', '4321', '500000', String(ROWS)]) {
      expect(await store.getJob(id)).toMatchObject({ id, state: Number(id) % 100 === 0 ? 'failed' : 'completed' });
    }
    // Failed jobs are still pruned in batches on their (state, finished_at) index.
    const pruning = new JobStore(t.pool, {
      schema: 'v10',
      retention: { completedMs: 30 * D, cancelledMs: 30 * D, failedMs: 1000 * 60_000 },
      asyncCommit: false,
      preparedStatements: false,
    });
    await addLogsColumn(t.pool, 'v10');
    expect((await pruning.maintain(1000))?.pruned).toBe(1000);
  });

  it('through the TypeORM migration classes, in their transaction, a history of an older version keeps every row', async () => {
    await migrateBefore10(t.pool, 'orm');
    await fillHistory(t.pool, 'orm', 1000);
    const ds = new DataSource({ type: 'postgres', url: t.db.url, migrations: pgQueueMigrations({ schema: 'orm' }) });
    await ds.initialize();
    try {
      await ds.runMigrations({ transaction: 'all' });
    } finally {
      await ds.destroy();
    }
    expect((await t.pool.query(`SELECT max(version) AS v FROM orm.migrations`)).rows[0].v).toBe(
      Math.max(...loadMigrations().map((m) => m.version)),
    );
    expect((await t.pool.query(`SELECT count(*)::int AS n FROM orm.job_history`)).rows[0].n).toBe(1000);
    // A bound left by a pass whose swap never ran, 5 minutes ahead, is about to reject new rows: the
    // next pass drops it; the one after converts (all of its steps in one pass).
    const parts = new HistoryPartitions(t.pool, 'orm', D);
    const now = Number((await t.pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n);
    const soon = new Date(now + 300_000).toISOString();
    await t.pool.query(
      `ALTER TABLE orm.job_history_legacy ADD CONSTRAINT job_history_legacy_bound CHECK (finished_at < '${soon}') NOT VALID`,
    );
    expect((await parts.runOnce(D)).converted).toBe('bound-dropped');
    expect(await parts.legacyBound()).toBeNull();
    expect((await parts.runOnce(D)).converted).toBe('swapped');
    expect((await parts.legacyBound())!.bound).toBeGreaterThan(now + 3_600_000);
    expect((await t.pool.query(`SELECT count(*)::int AS n FROM orm.job_history`)).rows[0].n).toBe(1000);
    // Migrating again is a no-op.
    expect(await migrate(t.pool, 'orm')).toEqual([]);
  });
});
