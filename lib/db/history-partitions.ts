import { escapeIdentifier } from 'pg';
import type { PgPool, PgPoolClient } from '../core/pg-types';
import { lockKey } from './job-store';

/**
 * How long a partition DDL statement waits for its lock before giving up until the next pass.
 * Dropping or attaching a partition needs a short exclusive lock on its parent, which queues
 * behind any running query on job_history and holds up every history write behind it: a
 * bounded wait keeps a long report on the history from stalling completions for its length.
 */
export const PARTITION_LOCK_TIMEOUT_MS = 200;

/** The old table is narrowed at a boundary at least this far ahead (see convertLegacy). */
const LEGACY_BOUND_AHEAD_MS = 3_600_000;
/** A bound this close with the swap still undone is given up and chosen again. */
const LEGACY_BOUND_GIVE_UP_MS = 600_000;
/**
 * A partition's id range is recorded this long after its period ended at the earliest: an
 * hour more of lookups over it, against the risk of a write stamped before the end (a history
 * write inside a transaction that began then) arriving after its range was recorded.
 */
export const CLOSE_AFTER_MS = 3_600_000;
/** How long a booting node waits for the history lock to create a partition (see ensureAhead). */
export const BOOT_LOCK_WAIT_MS = 10_000;
/** Partitions are created for the current interval and this many after it. */
export const PARTITIONS_AHEAD = 2;

/** One partition of job_history_done: [lo, hi) in epoch milliseconds. */
export interface HistoryPartition {
  readonly name: string;
  readonly lo: number;
  readonly hi: number;
}

/** What one pass did. */
export interface HistoryPassResult {
  /** A step of the one-time conversion of a pre-version-10 history that ran (null: none). */
  readonly converted: 'bound-added' | 'bound-dropped' | 'validated' | 'swapped' | null;
  readonly created: string[];
  readonly dropped: string[];
  /** Statements that gave up on their lock (tried again next pass). */
  readonly lockTimeouts: number;
  /** Partitions whose id range was recorded this pass (recordIdBounds). */
  readonly closed: string[];
}

/** The partition's name: its lower bound in UTC, to the minute, so names sort by time. */
export function partitionName(lo: number): string {
  const d = new Date(lo).toISOString(); // 2026-12-01T13:00:00.000Z
  return `job_history_p${d.slice(0, 4)}${d.slice(5, 7)}${d.slice(8, 10)}t${d.slice(11, 13)}${d.slice(14, 16)}`;
}

/**
 * The ranges to create so that [now, now + (ahead + 1) intervals) is covered: intervals aligned
 * on the epoch (UTC midnight for days), clipped to what existing partitions already cover and to
 * `floor` (the lower bound of job_history_current). Pure, unit-tested.
 */
export function missingRanges(
  now: number,
  intervalMs: number,
  existing: readonly { lo: number; hi: number }[],
  floor: number,
  ahead = PARTITIONS_AHEAD,
): { lo: number; hi: number }[] {
  const out: { lo: number; hi: number }[] = [];
  const first = Math.floor(now / intervalMs);
  for (let k = first; k <= first + ahead; k++) {
    let lo = Math.max(k * intervalMs, floor);
    let hi = (k + 1) * intervalMs;
    for (const e of existing) {
      if (e.hi <= lo || e.lo >= hi) continue;
      if (e.lo <= lo) lo = Math.max(lo, e.hi);
      else hi = Math.min(hi, e.lo);
    }
    if (lo < hi) out.push({ lo, hi });
  }
  return out;
}

/**
 * Keeps job_history partitioned (migrations/0010_history_partitions.sql has the layout): creates
 * the partitions of completed and cancelled jobs ahead of time, drops those wholly past
 * retention, and converts a history from before version 10 once, without a long lock. Runs on
 * the elected maintenance node, each step in its own short transaction under its own advisory
 * lock (so the one-time VALIDATE never holds up the rescue of other nodes).
 */
export class HistoryPartitions {
  private readonly s: string;

  constructor(
    private readonly pool: PgPool,
    private readonly schema: string,
    private readonly intervalMs: number,
  ) {
    this.s = escapeIdentifier(schema);
  }

  private t(name: string): string {
    return `${this.s}.${escapeIdentifier(name)}`;
  }

  /**
   * Runs `fn` in a transaction holding the history lock; null when another node holds it.
   * With `waitMs`, waits that long for the lock instead (a lock timeout, 55P03, past it).
   */
  private async step<T>(
    fn: (c: PgPoolClient) => Promise<T>,
    lockTimeoutMs = PARTITION_LOCK_TIMEOUT_MS,
    waitMs?: number,
  ): Promise<T | null> {
    const c = await this.pool.connect();
    const ignore = (): void => undefined;
    c.on('error', ignore);
    try {
      await c.query('BEGIN');
      const key = lockKey(`nestjs-pg-queue:history:${this.schema}`);
      if (waitMs !== undefined) {
        await c.query(`SELECT set_config('lock_timeout', $1, true)`, [`${waitMs}ms`]);
        await c.query(`SELECT pg_advisory_xact_lock($1::bigint)`, [key]);
      } else {
        const { rows } = await c.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock($1::bigint) AS locked`, [key]);
        if (!rows[0].locked) {
          await c.query('ROLLBACK');
          return null;
        }
      }
      // Transaction-scoped (PgBouncer transaction mode keeps no session state).
      await c.query(`SELECT set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
      const out = await fn(c);
      await c.query('COMMIT');
      return out;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      c.off('error', ignore);
      c.release();
    }
  }

  /** Which layout the schema has now. */
  async layout(): Promise<{ current: boolean; legacy: boolean; bounds: boolean; now: number }> {
    const { rows } = await this.pool.query<{ current: boolean; legacy: boolean; bounds: boolean; now: number }>(
      `SELECT to_regclass($1) IS NOT NULL AS current, to_regclass($2) IS NOT NULL AS legacy,
              to_regclass($3) IS NOT NULL AS bounds, extract(epoch FROM now())::float8 * 1000 AS now`,
      [this.t('job_history_current'), this.t('job_history_legacy'), this.t('job_history_id_bounds')],
    );
    return rows[0];
  }

  /** The ranged partitions of job_history_done, and the lower bound of job_history_current. */
  async partitions(): Promise<{ floor: number; list: HistoryPartition[] }> {
    const bound = (side: string) => `(regexp_match(pg_get_expr(c.relpartbound, c.oid), '${side} \\(''([^'']+)''\\)'))[1]`;
    const { rows } = await this.pool.query<{ name: string; lo: number | null; hi: number | null; parent: string }>(
      `SELECT c.relname AS name, p.relname AS parent,
              extract(epoch FROM ${bound('FROM')}::timestamptz)::float8 * 1000 AS lo,
              extract(epoch FROM ${bound('TO')}::timestamptz)::float8 * 1000 AS hi
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
       WHERE i.inhparent IN ($1::regclass, $2::regclass)`,
      [this.t('job_history_done'), this.t('job_history')],
    );
    const current = rows.find((r) => r.name === 'job_history_current');
    const floor = current?.lo ?? -Infinity;
    const list = rows
      .filter((r) => r.parent === 'job_history_done' && r.lo !== null && r.hi !== null)
      .map((r) => ({ name: r.name, lo: r.lo as number, hi: r.hi as number }))
      .sort((a, b) => a.lo - b.lo);
    return { floor, list };
  }

  /**
   * One pass: the conversion step due (if the history predates version 10), then partitions
   * created ahead and partitions past `dropAfterMs` dropped. `now` overrides the database clock
   * (tests and the benchmark create past partitions with it).
   */
  async runOnce(dropAfterMs: number, now?: number): Promise<HistoryPassResult> {
    const layout = await this.layout();
    const at = now ?? layout.now;
    const result = {
      converted: null as HistoryPassResult['converted'],
      created: [] as string[],
      dropped: [] as string[],
      lockTimeouts: 0,
      closed: [] as string[],
    };
    if (!layout.current) {
      result.converted = await this.convertLegacy(at);
      if (result.converted !== 'swapped') return result;
    }
    const list = await this.createAhead(at, result);
    for (const p of list) {
      if (p.hi > at - dropAfterMs) continue;
      const drop = async (c: PgPoolClient): Promise<void> => {
        await c.query(`DROP TABLE ${this.t(p.name)}`);
        if (layout.bounds) await c.query(`DELETE FROM ${this.t('job_history_id_bounds')} WHERE partition = $1`, [p.name]);
      };
      if ((await this.tryStep(drop, result)) !== null) result.dropped.push(p.name);
    }
    // On the database clock only: a pass with `now` overridden (tests, the benchmark) creates past
    // partitions to fill them afterwards, and a partition closed before it is filled would hide
    // its rows from lookups by id. Those call recordIdBounds themselves once the rows are in.
    if (now === undefined) result.closed.push(...(await this.recordIdBounds(result)));
    return result;
  }

  /**
   * Records the id range of each ranged partition whose period is over, once, so lookups by id
   * skip it unless the id is in that range (migration 11, history-by-id.ts historyByIdParamSql). A
   * partition is closed when its period ended at least CLOSE_AFTER_MS ago and no transaction
   * that began before that end is still open (pg_stat_activity, as far as this role sees it):
   * every history write stamps finished_at with its transaction's start, so no later write can
   * land there. The SHARE lock waits for writes in flight (bounded by the lock timeout). Answers
   * the partitions closed.
   */
  async recordIdBounds(result: { lockTimeouts: number } = { lockTimeouts: 0 }): Promise<string[]> {
    const layout = await this.layout();
    if (!layout.current || !layout.bounds) return [];
    const { list } = await this.partitions();
    const bounds = this.t('job_history_id_bounds');
    const known = new Set(
      (await this.pool.query<{ partition: string }>(`SELECT partition FROM ${bounds}`)).rows.map((r) => r.partition),
    );
    const { rows } = await this.pool.query<{ oldest: number | null }>(
      `SELECT extract(epoch FROM min(xact_start))::float8 * 1000 AS oldest FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
         AND xact_start IS NOT NULL`,
    );
    const openSince = Math.min(layout.now - CLOSE_AFTER_MS, rows[0].oldest ?? Infinity);
    const closed: string[] = [];
    for (const p of list) {
      if (known.has(p.name) || p.hi > openSince) continue;
      const close = async (c: PgPoolClient): Promise<void> => {
        await c.query(`LOCK TABLE ${this.t(p.name)} IN SHARE MODE`);
        await c.query(
          `INSERT INTO ${bounds} (partition, lo, hi, min_id, max_id)
           SELECT $1, $2::timestamptz, $3::timestamptz, min(id), max(id) FROM ${this.t(p.name)}
           ON CONFLICT (partition) DO NOTHING`,
          [p.name, new Date(p.lo).toISOString(), new Date(p.hi).toISOString()],
        );
      };
      // In order, and no further after one that could not be closed: the lookups take every
      // partition past the newest closed one as open, so none older may stay unrecorded.
      if ((await this.tryStep(close, result)) === null) break;
      closed.push(p.name);
    }
    return closed;
  }

  /**
   * Creates the partitions missing for the current interval and the next ones, and nothing
   * else (no drop, no conversion step): what every connection runs at boot, so finished jobs
   * land in a ranged partition from the first one on. Rows that reach the default partition are
   * the ones an ATTACH next to them can break: an insert routed to the default partition before
   * a concurrent ATTACH commits fails its partition check after it ("violates partition
   * constraint"), seen once in the suite when a cancel raced the first pass after a fresh
   * install. It waits for the history lock (up to BOOT_LOCK_WAIT_MS per partition) where the
   * pass skips a busy step: two nodes booting at once, each skipping the step the other held,
   * once left a partition between them uncreated (CI, stop 21). Answers the names it created
   * (another node may have created the rest).
   */
  async ensureAhead(): Promise<string[]> {
    const layout = await this.layout();
    if (!layout.current) return [];
    const result = { created: [] as string[], lockTimeouts: 0 };
    await this.createAhead(layout.now, result, BOOT_LOCK_WAIT_MS);
    return result.created;
  }

  /** Creates what missingRanges names at `at`; answers the ranged partitions found before. */
  private async createAhead(
    at: number,
    result: { created: string[]; lockTimeouts: number },
    waitMs?: number,
  ): Promise<HistoryPartition[]> {
    const { floor, list } = await this.partitions();
    for (const r of missingRanges(at, this.intervalMs, list, floor)) {
      const name = partitionName(r.lo);
      // false when another node created it first; null when the lock was not had
      const created = await this.tryStep((c) => this.createPartition(name, r.lo, r.hi, c), result, waitMs);
      if (created) result.created.push(name);
      if (created === null && waitMs !== undefined) break; // waited in vain once: boot goes on, the pass makes the rest
    }
    return list;
  }

  /**
   * A step that gives up on a lock timeout (55P03), counted, instead of failing the pass.
   * Answers what `fn` answered, or null when the step did not run (the lock not had).
   */
  private async tryStep<T>(
    fn: (c: PgPoolClient) => Promise<T>,
    result: { lockTimeouts: number },
    waitMs?: number,
  ): Promise<T | null> {
    try {
      return await this.step(fn, PARTITION_LOCK_TIMEOUT_MS, waitMs);
    } catch (err) {
      if ((err as { code?: string }).code === '55P03') {
        result.lockTimeouts++;
        return null;
      }
      throw err;
    }
  }

  /**
   * Creates [lo, hi) as a table of its own and attaches it: ATTACH takes SHARE UPDATE EXCLUSIVE
   * on job_history_done (history writes go on), where CREATE TABLE ... PARTITION OF would take
   * ACCESS EXCLUSIVE. Rows that went to the default partition meanwhile (maintenance did not run)
   * move into the new one first, in this transaction, under the default's lock.
   */
  async createPartition(name: string, lo: number, hi: number, client?: PgPoolClient): Promise<boolean> {
    const run = async (c: PgPoolClient): Promise<boolean> => {
      const p = this.t(name);
      // Another node (booting at the same moment) may have created it since the list was read.
      const exists = await c.query<{ r: string | null }>(`SELECT to_regclass($1) AS r`, [p]);
      if (exists.rows[0].r !== null) return false;
      const from = new Date(lo).toISOString();
      const to = new Date(hi).toISOString();
      await c.query(
        `CREATE TABLE ${p} (LIKE ${this.t('job_history')} INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)
         WITH (autovacuum_vacuum_insert_scale_factor = 0.05)`,
      );
      await c.query(`CREATE INDEX ${escapeIdentifier(`${name}_id_idx`)} ON ${p} (id)`);
      // The dashboard's throughput reads finish times of the last hour; rows arrive in finish
      // order, so a BRIN index answers it without an entry per job (migration 11).
      await c.query(
        `CREATE INDEX ${escapeIdentifier(`${name}_finished_idx`)} ON ${p} USING brin (finished_at) WITH (autosummarize = on)`,
      );
      const dflt = this.t('job_history_done_default');
      await c.query(`LOCK TABLE ${dflt} IN ACCESS EXCLUSIVE MODE`);
      await c.query(
        `WITH moved AS (DELETE FROM ${dflt} WHERE finished_at >= $1::timestamptz AND finished_at < $2::timestamptz RETURNING *)
         INSERT INTO ${p} SELECT * FROM moved`,
        [from, to],
      );
      await c.query(`ALTER TABLE ${this.t('job_history_done')} ATTACH PARTITION ${p} FOR VALUES FROM ('${from}') TO ('${to}')`);
      return true;
    };
    if (client) return run(client);
    const made = await this.step(run);
    if (made === null) throw new Error('another node holds the history partition lock');
    return made;
  }

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
  async convertLegacy(now: number): Promise<HistoryPassResult['converted']> {
    let c = await this.legacyBound();
    if (c && c.bound - now < LEGACY_BOUND_GIVE_UP_MS) {
      const legacy = this.t('job_history_legacy');
      const dropped = await this.step((x) => x.query(`ALTER TABLE ${legacy} DROP CONSTRAINT job_history_legacy_bound`));
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
    const swapped = await this.step((x) => this.swapLegacy(x, t0));
    return swapped === null ? 'validated' : 'swapped';
  }

  /** The CHECK (finished_at < T0) of the old table, if added: T0 and whether it is validated. */
  async legacyBound(): Promise<{ valid: boolean; bound: number } | null> {
    const { rows } = await this.pool.query<{ valid: boolean; bound: number }>(
      `SELECT convalidated AS valid,
              extract(epoch FROM (regexp_match(pg_get_constraintdef(oid), '''([^'']+)'''))[1]::timestamptz)::float8 * 1000 AS bound
       FROM pg_constraint WHERE conrelid = $1::regclass AND conname = 'job_history_legacy_bound'`,
      [this.t('job_history_legacy')],
    );
    return rows[0] ?? null;
  }

  /**
   * Step 1 of convertLegacy: T0 is the first partition boundary at least an hour ahead and after
   * every finished_at in the old table (three probes of its (state, finished_at) index).
   * false when another node holds the lock.
   */
  async addLegacyBound(now: number): Promise<boolean> {
    const legacy = this.t('job_history_legacy');
    const { rows } = await this.pool.query<{ m: number | null }>(
      `SELECT extract(epoch FROM greatest(
          (SELECT max(finished_at) FROM ${legacy} WHERE state = 'completed'),
          (SELECT max(finished_at) FROM ${legacy} WHERE state = 'failed'),
          (SELECT max(finished_at) FROM ${legacy} WHERE state = 'cancelled')))::float8 * 1000 AS m`,
    );
    const after = Math.max(now + LEGACY_BOUND_AHEAD_MS, (rows[0].m ?? 0) + 1);
    const t0 = new Date(Math.ceil(after / this.intervalMs) * this.intervalMs).toISOString();
    const done = await this.step((x) =>
      x.query(`ALTER TABLE ${legacy} ADD CONSTRAINT job_history_legacy_bound CHECK (finished_at < '${t0}') NOT VALID`),
    );
    return done !== null;
  }

  /** Step 2 of convertLegacy, in `client`'s transaction or its own (null: another node holds the lock). */
  async validateLegacyBound(client?: PgPoolClient): Promise<true | null> {
    const sql = `ALTER TABLE ${this.t('job_history_legacy')} VALIDATE CONSTRAINT job_history_legacy_bound`;
    if (client) {
      await client.query(sql);
      return true;
    }
    return this.step(async (x) => {
      await x.query(sql);
      return true as const;
    });
  }

  /** Step 3 of convertLegacy: catalog-only (the validated CHECK proves the new bound). */
  async swapLegacy(c: PgPoolClient, t0: string): Promise<void> {
    const h = this.t('job_history');
    const legacy = this.t('job_history_legacy');
    await c.query(`ALTER TABLE ${h} DETACH PARTITION ${legacy}`);
    await c.query(`ALTER TABLE ${h} ATTACH PARTITION ${legacy} FOR VALUES FROM (MINVALUE) TO ('${t0}')`);
    await c.query(
      `CREATE TABLE ${this.t('job_history_current')} PARTITION OF ${h} FOR VALUES FROM ('${t0}') TO (MAXVALUE) PARTITION BY LIST (state)`,
    );
    await c.query(
      `CREATE TABLE ${this.t('job_history_failed')} PARTITION OF ${this.t('job_history_current')} FOR VALUES IN ('failed')
       WITH (autovacuum_vacuum_insert_scale_factor = 0.05)`,
    );
    await c.query(`CREATE INDEX job_history_failed_id_idx ON ${this.t('job_history_failed')} (id)`);
    // Not on the parent since migration 11: retention, counts and the throughput of failed jobs.
    await c.query(`CREATE INDEX job_history_failed_retention_idx ON ${this.t('job_history_failed')} (state, finished_at)`);
    await c.query(
      `CREATE TABLE ${this.t('job_history_done')} PARTITION OF ${this.t('job_history_current')}
       FOR VALUES IN ('completed', 'cancelled') PARTITION BY RANGE (finished_at)`,
    );
    await c.query(
      `CREATE TABLE ${this.t('job_history_done_default')} PARTITION OF ${this.t('job_history_done')} DEFAULT
       WITH (autovacuum_vacuum_insert_scale_factor = 0.05)`,
    );
    await c.query(`CREATE INDEX job_history_done_default_id_idx ON ${this.t('job_history_done_default')} (id)`);
    await c.query(
      `CREATE INDEX job_history_done_default_retention_idx ON ${this.t('job_history_done_default')} (state, finished_at)`,
    );
  }
}
