import { escapeIdentifier } from 'pg';
import type { PgPool, PgPoolClient } from '../../core/pg-types';
import { ForeignLockWarnings } from '../lock-holders';
import { LegacyHistory, type LegacyStep } from './legacy';
import { HistoryLock } from './lock';
import { missingRanges, partitionName, type HistoryPartition } from './ranges';

/**
 * A partition's id range is recorded this long after its period ended at the earliest: an
 * hour more of lookups over it, against the risk of a write stamped before the end (a history
 * write inside a transaction that began then) arriving after its range was recorded.
 */
export const CLOSE_AFTER_MS = 3_600_000;
/** How long a booting node waits for the history lock to create a partition (see ensureAhead). */
export const BOOT_LOCK_WAIT_MS = 10_000;

/** What one pass did. */
export interface HistoryPassResult {
  /** A step of the one-time conversion of a pre-version-10 history that ran (null: none). */
  readonly converted: LegacyStep;
  readonly created: string[];
  readonly dropped: string[];
  /** Statements that gave up on their lock (tried again next pass). */
  readonly lockTimeouts: number;
  /** Partitions whose id range was recorded this pass (recordIdBounds). */
  readonly closed: string[];
}

/** A ranged partition as the catalog lists it: its table's oid too. */
export interface ListedPartition extends HistoryPartition {
  readonly oid: string;
}

/**
 * Keeps job_history partitioned (migrations/0010_history_partitions.sql has the layout): creates
 * the partitions of completed and cancelled jobs ahead of time, drops those wholly past
 * retention, and converts a history from before version 10 once, without a long lock. Runs on
 * the elected maintenance node, each step in its own short transaction under its own advisory
 * lock (so the one-time VALIDATE never holds up the rescue of other nodes).
 */
export class HistoryPartitions {
  private readonly lock: HistoryLock;
  private readonly legacy: LegacyHistory;
  /**
   * The tables (by oid) of the ranged partitions whose id range this process saw recorded, read
   * or written. By oid, not by name: a partition dropped elsewhere and made again under its name
   * is a new table, whose range must be recorded afresh (lookups by id pass over an unrecorded
   * partition older than the newest recorded one).
   */
  private readonly recorded = new Set<string>();

  constructor(
    private readonly pool: PgPool,
    schema: string,
    private readonly intervalMs: number,
    /** Where a warning goes when a session that is not a node of this app holds the history lock. @default none */
    warn: (message: string) => void = () => undefined,
  ) {
    this.lock = new HistoryLock(pool, schema, new ForeignLockWarnings(warn));
    this.legacy = new LegacyHistory(pool, this.lock, intervalMs);
  }

  private t(name: string): string {
    return this.lock.t(name);
  }

  /** Which layout the schema has now. */
  async layout(): Promise<{ current: boolean; legacy: boolean; bounds: boolean; now: number }> {
    const { rows } = await this.pool.query<{ current: boolean; legacy: boolean; bounds: boolean; now: number }>(
      `SELECT pg_catalog.to_regclass($1) IS NOT NULL AS current, pg_catalog.to_regclass($2) IS NOT NULL AS legacy,
              pg_catalog.to_regclass($3) IS NOT NULL AS bounds, extract(epoch FROM now())::float8 * 1000::float8 AS now`,
      [this.t('job_history_current'), this.t('job_history_legacy'), this.t('job_history_id_bounds')],
    );
    return rows[0];
  }

  /** The ranged partitions of job_history_done, and the lower bound of job_history_current. */
  async partitions(): Promise<{ floor: number; list: ListedPartition[] }> {
    const bound = (side: string) =>
      `(pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid), '${side} \\(''([^'']+)''\\)'))[1]`;
    const { rows } = await this.pool.query<{ name: string; oid: string; lo: number | null; hi: number | null; parent: string }>(
      `SELECT c.relname AS name, c.oid::text AS oid, p.relname AS parent,
              extract(epoch FROM ${bound('FROM')}::timestamptz)::float8 * 1000::float8 AS lo,
              extract(epoch FROM ${bound('TO')}::timestamptz)::float8 * 1000::float8 AS hi
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
       WHERE i.inhparent IN ($1::regclass::oid, $2::regclass::oid)`,
      [this.t('job_history_done'), this.t('job_history')],
    );
    const current = rows.find((r) => r.name === 'job_history_current');
    const floor = current?.lo ?? -Infinity;
    const list = rows
      .filter((r) => r.parent === 'job_history_done' && r.lo !== null && r.hi !== null)
      .map((r) => ({ name: r.name, oid: r.oid, lo: r.lo as number, hi: r.hi as number }))
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
    const listed = await this.createAhead(at, result);
    for (const p of listed) {
      if (p.hi > at - dropAfterMs) continue;
      const drop = async (c: PgPoolClient): Promise<void> => {
        await c.query(`DROP TABLE ${this.t(p.name)}`);
        if (layout.bounds) await c.query(`DELETE FROM ${this.t('job_history_id_bounds')} WHERE partition = $1`, [p.name]);
      };
      if ((await this.lock.tryStep(drop, result)) !== null) {
        result.dropped.push(p.name);
        this.recorded.delete(p.oid);
      }
    }
    // On the database clock only: a pass with `now` overridden (tests, the benchmark) creates past
    // partitions to fill them afterwards, and a partition closed before it is filled would hide
    // its rows from lookups by id. Those call recordIdBounds themselves once the rows are in.
    // The layout and the partitions just read serve it too, less those dropped (a partition
    // created this pass is open, so missing from the list changes nothing).
    if (now === undefined) {
      const list = listed.filter((p) => !result.dropped.includes(p.name));
      result.closed.push(...(await this.recordIdBounds(result, { ...layout, list })));
    }
    return result;
  }

  /**
   * Records the id range of each ranged partition whose period is over, once, so lookups by id
   * skip it unless the id is in that range (migration 11, by-id.ts historyByIdParamSql). A
   * partition is closed when its period ended at least CLOSE_AFTER_MS ago and no transaction
   * that began before that end is still open (pg_stat_activity, as far as this role sees it):
   * every history write stamps finished_at with its transaction's start, so no later write can
   * land there. The SHARE lock waits for writes in flight (bounded by the lock timeout). Answers
   * the partitions closed.
   */
  async recordIdBounds(
    result: { lockTimeouts: number } = { lockTimeouts: 0 },
    /** The layout and ranged partitions as this pass read them: not read again. */
    seen?: { current: boolean; bounds: boolean; now: number; list: readonly ListedPartition[] },
  ): Promise<string[]> {
    const layout = seen ?? (await this.layout());
    if (!layout.current || !layout.bounds) return [];
    const list = seen?.list ?? (await this.partitions()).list;
    // Nothing to read while every partition old enough is one this process saw recorded: the
    // steady state of a pass every few seconds, where it read the recorded names and the oldest
    // transaction each time (issue 30: six statements a pass, now two).
    if (list.every((p) => p.hi > layout.now - CLOSE_AFTER_MS || this.recorded.has(p.oid))) return [];
    const bounds = this.t('job_history_id_bounds');
    const known = new Set(
      (await this.pool.query<{ partition: string }>(`SELECT partition FROM ${bounds}`)).rows.map((r) => r.partition),
    );
    for (const p of list) if (known.has(p.name)) this.recorded.add(p.oid);
    const { rows } = await this.pool.query<{ oldest: number | null }>(
      `SELECT extract(epoch FROM pg_catalog.min(xact_start))::float8 * 1000::float8 AS oldest FROM pg_stat_activity
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
           SELECT $1, $2::timestamptz, $3::timestamptz, pg_catalog.min(id), pg_catalog.max(id) FROM ${this.t(p.name)}
           ON CONFLICT (partition) DO NOTHING`,
          [p.name, new Date(p.lo).toISOString(), new Date(p.hi).toISOString()],
        );
      };
      // In order, and no further after one that could not be closed: the lookups take every
      // partition past the newest closed one as open, so none older may stay unrecorded.
      if ((await this.lock.tryStep(close, result)) === null) break;
      closed.push(p.name);
      this.recorded.add(p.oid);
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
   * (another node may have created the rest). `now` overrides the database clock, as in runOnce
   * (tests: what "the current interval" is must not depend on when the test runs).
   */
  async ensureAhead(now?: number): Promise<string[]> {
    const layout = await this.layout();
    if (!layout.current) return [];
    const result = { created: [] as string[], lockTimeouts: 0 };
    await this.createAhead(now ?? layout.now, result, BOOT_LOCK_WAIT_MS);
    return result.created;
  }

  /** Creates what missingRanges names at `at`; answers the ranged partitions found before. */
  private async createAhead(
    at: number,
    result: { created: string[]; lockTimeouts: number },
    waitMs?: number,
  ): Promise<ListedPartition[]> {
    const { floor, list } = await this.partitions();
    for (const r of missingRanges(at, this.intervalMs, list, floor)) {
      const name = partitionName(r.lo);
      // false when another node created it first; null when the lock was not had
      const created = await this.lock.tryStep((c) => this.createPartition(name, r.lo, r.hi, c), result, waitMs);
      if (created) result.created.push(name);
      if (created === null && waitMs !== undefined) break; // waited in vain once: boot goes on, the pass makes the rest
    }
    return list;
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
      const exists = await c.query<{ r: string | null }>(`SELECT pg_catalog.to_regclass($1) AS r`, [p]);
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
    const made = await this.lock.step(run);
    if (made === null) throw new Error('another node holds the history partition lock');
    return made;
  }

  // The one-time conversion of a pre-version-10 history (legacy.ts).

  convertLegacy(now: number): Promise<LegacyStep> {
    return this.legacy.convertLegacy(now);
  }

  legacyBound(): Promise<{ valid: boolean; bound: number } | null> {
    return this.legacy.legacyBound();
  }

  addLegacyBound(now: number): Promise<boolean> {
    return this.legacy.addLegacyBound(now);
  }

  validateLegacyBound(client?: PgPoolClient): Promise<true | null> {
    return this.legacy.validateLegacyBound(client);
  }

  swapLegacy(c: PgPoolClient, t0: string): Promise<void> {
    return this.legacy.swapLegacy(c, t0);
  }
}
