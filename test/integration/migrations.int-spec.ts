import 'reflect-metadata';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { pgQueueMigrations, Process, Processor, QueueService, type Job } from '../../lib';
import { applyMigration, loadMigrations, migrate } from '../../lib/db/migrator';
import type { SqlExecutor } from '../../lib/db/executor';
import { bootApp } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase, testPool } from '../support/database';

const done: string[] = [];

@Processor('tenant-work')
class TenantProcessor {
  @Process()
  run(job: Job<{ tag: string }>) {
    done.push(job.payload.tag);
  }
}

describe('migrations', () => {
  let db: TestDatabase;
  let pool: Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = testPool(db.url, 12);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('ten nodes migrating at once apply each step exactly once', async () => {
    const pools = Array.from({ length: 10 }, () => testPool(db.url, 1));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p, 'racing')));
      // Exactly one node applied the steps; the nine others found them done.
      const versions = loadMigrations().map((m) => m.version);
      expect(results.filter((r) => r.length > 0)).toEqual([versions]);
      const { rows } = await pool.query('SELECT version FROM racing.migrations ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(versions);
      const t = await pool.query(
        `SELECT to_regclass('racing.jobs') IS NOT NULL AS jobs, to_regclass('racing.job_history') IS NOT NULL AS history`,
      );
      expect(t.rows[0]).toEqual({ jobs: true, history: true });
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('TypeORM migration classes create the schema, and the module then boots with migrate: false', async () => {
    const ds = new DataSource({ type: 'postgres', url: db.url, migrations: pgQueueMigrations({ schema: 'tenant_a' }) });
    await ds.initialize();
    try {
      const ran = await ds.runMigrations({ transaction: 'each' });
      expect(ran).toHaveLength(loadMigrations().length);
      expect(await ds.runMigrations()).toHaveLength(0);
    } finally {
      await ds.destroy();
    }
    const app = await bootApp({
      options: { connection: db.url, schema: 'tenant_a', migrate: false },
      queues: [{ name: 'tenant-work' }],
      providers: [TenantProcessor],
    });
    try {
      await app.get(QueueService).add('tenant-work', 'x', { tag: 'from-tenant-a' });
      await waitFor(() => done.includes('from-tenant-a'), { message: 'job in schema tenant_a to run' });
      // The handler has returned; its outcome is written in the next batch, a moment later.
      const completed = async () =>
        (await pool.query(`SELECT count(*)::int AS n FROM tenant_a.job_history WHERE state = 'completed'`)).rows[0].n;
      await waitFor(async () => (await completed()) >= 1, { message: 'the completion to be written to tenant_a.job_history' });
      expect(await completed()).toBe(1);
      // The default schema was never created: everything lives in tenant_a.
      expect((await pool.query(`SELECT to_regnamespace('pgqueue') AS s`)).rows[0].s).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('migration 8 (flows) on a live install: jobs of version 7, waiting and running, keep their state and run', async () => {
    const client = await pool.connect();
    const exec: SqlExecutor = { query: async (text, params) => (await client.query(text, params as unknown[])).rows };
    try {
      for (const m of loadMigrations().filter((m) => m.version <= 7)) {
        await client.query('BEGIN');
        await applyMigration(exec, 'live8', m);
        await client.query('COMMIT');
      }
      await client.query(`INSERT INTO live8.jobs (queue, name, payload) VALUES ('q', 'waiting', '{}')`);
      await client.query(`INSERT INTO live8.jobs (queue, name, payload, state, locked_by, locked_until, attempt)
                          VALUES ('q', 'running', '{}', 'active', 'w', now() + interval '1 minute', 1)`);
      // The new column defaults are catalog-only: the table file is not rewritten.
      const before = (await client.query(`SELECT pg_relation_filenode('live8.jobs') AS f`)).rows[0].f;
      await client.query('BEGIN');
      expect(
        await applyMigration(
          exec,
          'live8',
          loadMigrations().find((m) => m.version === 8)!,
        ),
      ).toBe(true);
      await client.query('COMMIT');
      expect((await client.query(`SELECT pg_relation_filenode('live8.jobs') AS f`)).rows[0].f).toBe(before);
      const { rows } = await client.query(
        `SELECT name, state, pending_dependencies, has_dependents, has_dependencies FROM live8.jobs ORDER BY id`,
      );
      expect(rows).toEqual([
        { name: 'waiting', state: 'waiting', pending_dependencies: 0, has_dependents: false, has_dependencies: false },
        { name: 'running', state: 'active', pending_dependencies: 0, has_dependents: false, has_dependencies: false },
      ]);
      // The widened check is NOT VALID (no scan at upgrade), and refuses other states all the same.
      const check = await client.query(
        `SELECT convalidated FROM pg_constraint WHERE conname = 'jobs_state_check' AND conrelid = 'live8.jobs'::regclass`,
      );
      expect(check.rows).toEqual([{ convalidated: false }]);
      await expect(client.query(`UPDATE live8.jobs SET state = 'paused' WHERE name = 'waiting'`)).rejects.toThrow(
        /jobs_state_check/,
      );
      // The old jobs finish as before: the trigger does not fire for them (no dependents).
      await client.query(`WITH d AS (DELETE FROM live8.jobs RETURNING *) SELECT count(*) FROM d`);
      expect((await client.query(`SELECT count(*)::int AS n FROM live8.job_dependencies`)).rows[0].n).toBe(0);
    } finally {
      client.release();
    }
    expect(await migrate(pool, 'live8')).toEqual(
      loadMigrations()
        .filter((m) => m.version > 8)
        .map((m) => m.version),
    );
  });

  it('0009 (progress, trace) adds its columns to a live install without rewriting jobs or job_history', async () => {
    // A schema at version 8 with jobs in both tables, as an install running the previous release.
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const db = { query: async (sql: string, params?: unknown[]) => (await client.query(sql, params as unknown[])).rows };
      for (const m of loadMigrations().filter((m) => m.version < 9)) await applyMigration(db as never, 'live', m);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await pool.query(
      `INSERT INTO live.jobs (queue, name, payload) SELECT 'q', 'n', jsonb_build_object('i', i) FROM generate_series(1, 500) i`,
    );
    await pool.query(`INSERT INTO live.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
      SELECT 100000 + i, 'q', 'n', '{}', 'completed', 0, now(), 1, 3, '[]', now(), now() FROM generate_series(1, 500) i`);
    const files = () =>
      pool.query(
        `SELECT relname, relfilenode FROM pg_class WHERE oid IN ('live.jobs'::regclass, 'live.job_history'::regclass) ORDER BY relname`,
      );
    const before = (await files()).rows;
    const m9 = loadMigrations().find((m) => m.version === 9)!;
    const c9 = await pool.connect();
    try {
      await c9.query('BEGIN');
      const db = { query: async (sql: string, params?: unknown[]) => (await c9.query(sql, params as unknown[])).rows };
      await applyMigration(db as never, 'live', m9);
      await c9.query('COMMIT');
    } finally {
      c9.release();
    }
    // The same files: the ALTERs changed only the catalog (a rewrite would take a new relfilenode).
    // Compared right after 0009: 0010 then renames job_history and puts a partitioned parent there.
    expect((await files()).rows).toEqual(before);
    expect(await migrate(pool, 'live')).toEqual(
      loadMigrations()
        .filter((m) => m.version > 9)
        .map((m) => m.version),
    );
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n, count(progress)::int AS with_progress, count(trace)::int AS with_trace FROM live.jobs`,
    );
    expect(rows[0]).toEqual({ n: 500, with_progress: 0, with_trace: 0 });
    const h = await pool.query(
      `SELECT count(*)::int AS n, count(progress)::int AS p, count(trace)::int AS t FROM live.job_history`,
    );
    expect(h.rows[0]).toEqual({ n: 500, p: 0, t: 0 });
  });

  it('leaves exactly the intended indexes on jobs: one for the claim, one for active rows by lease', async () => {
    await migrate(pool, 'indexed');
    const { rows } = await pool.query<{ name: string; def: string }>(
      `SELECT indexname AS name, regexp_replace(indexdef, '^.* USING ', '') AS def
       FROM pg_indexes WHERE schemaname = 'indexed' AND tablename = 'jobs' ORDER BY indexname`,
    );
    // Every index here costs each claimed row an entry (the claim changes state, so its update
    // is never HOT): the primary key and jobs_active_idx. jobs_active_idx is the only index on
    // active rows (0005 replaced 0001's jobs_lease_idx with it): rescue, stalled counts, the
    // globalConcurrency count and the dashboard's running-per-node all read it. An index added
    // here adds to every claim's cost: add it to this list only on purpose.
    expect(rows).toEqual([
      { name: 'jobs_active_idx', def: "btree (queue, locked_until) WHERE (state = 'active'::text)" },
      { name: 'jobs_claim_idx', def: "btree (queue, priority, run_at, id) WHERE (state = 'waiting'::text)" },
      // Migration 17's grouped claim (docs/groups.md): grouped jobs only, so a job without a
      // group costs none of them, on insert or on claim. Both hold waiting rows only: migration
      // 21 dropped 17's index of grouped active rows, which cost every grouped claim an entry per
      // job (the per-group running count reads jobs_active_idx).
      {
        name: 'jobs_group_claim_idx',
        def: "btree (queue, group_key, priority, run_at, id) WHERE ((state = 'waiting'::text) AND (group_key IS NOT NULL))",
      },
      {
        name: 'jobs_group_fifo_idx',
        def: "btree (queue, group_key, id) WHERE ((state = 'waiting'::text) AND (group_key IS NOT NULL))",
      },
      { name: 'jobs_pkey', def: 'btree (id)' },
      { name: 'jobs_unique_key_idx', def: 'btree (queue, unique_key) WHERE (unique_key IS NOT NULL)' },
      { name: 'jobs_waiting_children_idx', def: "btree (queue, id) WHERE (state = 'waiting-children'::text)" },
    ]);
  });

  it('migrating an up-to-date schema again is a no-op', async () => {
    expect(await migrate(pool, 'racing')).toEqual([]);
  });
});
