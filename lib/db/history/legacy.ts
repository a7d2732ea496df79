import type { PgPool, PgPoolClient } from '../../core/pg-types';
import type { HistoryLock } from './lock';

/** The old table is narrowed at a boundary at least this far ahead (see convertLegacy). */
const LEGACY_BOUND_AHEAD_MS = 3_600_000;
/** A bound this close with the swap still undone is given up and chosen again. */
const LEGACY_BOUND_GIVE_UP_MS = 600_000;

/** A step of the one-time conversion of a pre-version-10 history that ran (null: none). */
export type LegacyStep = 'bound-added' | 'bound-dropped' | 'validated' | 'swapped' | null;

/**
 * The one-time conversion of a history from before version 10 (migrations/0010_history_partitions.sql):
 * the old table, attached whole, is narrowed to the rows older than a boundary without a long
 * lock, and the partitioned layout is created beside it. Each step under the history lock.
 */
export class LegacyHistory {
  constructor(
    private readonly pool: PgPool,
    private readonly lock: HistoryLock,
    private readonly intervalMs: number,
  ) {}

  /**
   * The one-time conversion of a history from before version 10, which the migration attached
   * whole (FROM MINVALUE TO MAXVALUE). Narrowing it needs a validated CHECK (finished_at < T0),
   * so ATTACH can skip the scan. Steps, each its own transaction, all in one pass normally:
   * 1. ADD CONSTRAINT ... NOT VALID (a brief exclusive lock, no scan), T0 a partition boundary
   *    at least an hour ahead and after every finished_at in the table;
   * 2. VALIDATE CONSTRAINT: the one scan of the old rows, under SHARE UPDATE EXCLUSIVE, which
   *    lets reads, inserts and deletes go on (measured: 85 ms per 1,000,000 rows);
   * 3. the swap, catalog-only: re-attach the old table as [MINVALUE, T0) and create
   *    job_history_current for [T0, MAXVALUE). Rows finishing before T0 still go to the old table.
   * Until the swap, a row finishing at T0 or later would break the constraint: a bound less
   * than 10 minutes ahead with the swap undone is dropped and chosen again.
   */
  async convertLegacy(now: number): Promise<LegacyStep> {
    let c = await this.legacyBound();
    if (c && c.bound - now < LEGACY_BOUND_GIVE_UP_MS) {
      const legacy = this.lock.t('job_history_legacy');
      const dropped = await this.lock.step((x) => x.query(`ALTER TABLE ${legacy} DROP CONSTRAINT job_history_legacy_bound`));
      return dropped === null ? null : 'bound-dropped';
    }
    if (!c) {
      if (!(await this.addLegacyBound(now))) return null;
      c = await this.legacyBound();
      if (!c) return null;
    }
    // The scan: lock_timeout caps the wait for its lock, not its length.
    if (!c.valid && (await this.validateLegacyBound()) === null) return 'bound-added';
    const t0 = new Date(c.bound).toISOString();
    const swapped = await this.lock.step((x) => this.swapLegacy(x, t0));
    return swapped === null ? 'validated' : 'swapped';
  }

  /** The CHECK (finished_at < T0) of the old table, if added: T0 and whether it is validated. */
  async legacyBound(): Promise<{ valid: boolean; bound: number } | null> {
    const { rows } = await this.pool.query<{ valid: boolean; bound: number }>(
      `SELECT convalidated AS valid,
              extract(epoch FROM (pg_catalog.regexp_match(pg_catalog.pg_get_constraintdef(oid), '''([^'']+)'''))[1]::timestamptz)::float8 * 1000::float8 AS bound
       FROM pg_constraint WHERE conrelid = $1::regclass::oid AND conname = 'job_history_legacy_bound'`,
      [this.lock.t('job_history_legacy')],
    );
    return rows[0] ?? null;
  }

  /**
   * Step 1 of convertLegacy: T0 is the first partition boundary at least an hour ahead and after
   * every finished_at in the old table (three probes of its (state, finished_at) index).
   * false when another node holds the lock.
   */
  async addLegacyBound(now: number): Promise<boolean> {
    const legacy = this.lock.t('job_history_legacy');
    const { rows } = await this.pool.query<{ m: number | null }>(
      `SELECT extract(epoch FROM greatest(
          (SELECT pg_catalog.max(finished_at) FROM ${legacy} WHERE state = 'completed'),
          (SELECT pg_catalog.max(finished_at) FROM ${legacy} WHERE state = 'failed'),
          (SELECT pg_catalog.max(finished_at) FROM ${legacy} WHERE state = 'cancelled')))::float8 * 1000::float8 AS m`,
    );
    const after = Math.max(now + LEGACY_BOUND_AHEAD_MS, (rows[0].m ?? 0) + 1);
    const t0 = new Date(Math.ceil(after / this.intervalMs) * this.intervalMs).toISOString();
    const done = await this.lock.step((x) =>
      x.query(`ALTER TABLE ${legacy} ADD CONSTRAINT job_history_legacy_bound CHECK (finished_at < '${t0}') NOT VALID`),
    );
    return done !== null;
  }

  /** Step 2 of convertLegacy, in `client`'s transaction or its own (null: another node holds the lock). */
  async validateLegacyBound(client?: PgPoolClient): Promise<true | null> {
    const sql = `ALTER TABLE ${this.lock.t('job_history_legacy')} VALIDATE CONSTRAINT job_history_legacy_bound`;
    if (client) {
      await client.query(sql);
      return true;
    }
    return this.lock.step(async (x) => {
      await x.query(sql);
      return true as const;
    });
  }

  /** Step 3 of convertLegacy: catalog-only (the validated CHECK proves the new bound). */
  async swapLegacy(c: PgPoolClient, t0: string): Promise<void> {
    const h = this.lock.t('job_history');
    const legacy = this.lock.t('job_history_legacy');
    await c.query(`ALTER TABLE ${h} DETACH PARTITION ${legacy}`);
    await c.query(`ALTER TABLE ${h} ATTACH PARTITION ${legacy} FOR VALUES FROM (MINVALUE) TO ('${t0}')`);
    await c.query(
      `CREATE TABLE ${this.lock.t('job_history_current')} PARTITION OF ${h} FOR VALUES FROM ('${t0}') TO (MAXVALUE) PARTITION BY LIST (state)`,
    );
    await c.query(
      `CREATE TABLE ${this.lock.t('job_history_failed')} PARTITION OF ${this.lock.t('job_history_current')} FOR VALUES IN ('failed')
       WITH (autovacuum_vacuum_insert_scale_factor = 0.05)`,
    );
    await c.query(`CREATE INDEX job_history_failed_id_idx ON ${this.lock.t('job_history_failed')} (id)`);
    // Not on the parent since migration 11: retention, counts and the throughput of failed jobs.
    await c.query(`CREATE INDEX job_history_failed_retention_idx ON ${this.lock.t('job_history_failed')} (state, finished_at)`);
    await c.query(
      `CREATE TABLE ${this.lock.t('job_history_done')} PARTITION OF ${this.lock.t('job_history_current')}
       FOR VALUES IN ('completed', 'cancelled') PARTITION BY RANGE (finished_at)`,
    );
    await c.query(
      `CREATE TABLE ${this.lock.t('job_history_done_default')} PARTITION OF ${this.lock.t('job_history_done')} DEFAULT
       WITH (autovacuum_vacuum_insert_scale_factor = 0.05)`,
    );
    await c.query(`CREATE INDEX job_history_done_default_id_idx ON ${this.lock.t('job_history_done_default')} (id)`);
    await c.query(
      `CREATE INDEX job_history_done_default_retention_idx ON ${this.lock.t('job_history_done_default')} (state, finished_at)`,
    );
  }
}
