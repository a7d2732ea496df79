import { escapeIdentifier } from 'pg';
import type { SqlExecutor } from '../executor';

/**
 * Which tables the history has (migrations/0010_history_partitions.sql): `flat` before the
 * one-time conversion of a pre-version-10 history (or when unknown), `partitioned` once
 * job_history_current exists, `partitioned-legacy` when the old table is still beside it.
 */
export type HistoryLayout = 'flat' | 'partitioned' | 'partitioned-legacy';

/**
 * A SELECT of `cols` from the history rows with id $1 that visits only the partitions that can
 * hold it (a plain `WHERE id = $1` probes the id index of every partition: a partition is chosen
 * by finish time, which an id does not tell). For one id known before the statement runs: $1 id, $2 the end of the newest
 * closed partition (C), $3-$6 up to two finish-time ranges of closed partitions whose id range
 * holds the id (NULL when unused), all from the cached job_history_id_bounds (idLookup). Bind
 * parameters, unlike InitPlan or join values, prune at executor
 * startup, so the partitions left out are not even opened: the generic plan of an in-statement form (a join with the bounds table)
 * initialised all 35 partitions twice per call and was no faster than probing them all (0.54
 * against 0.50 ms p50, 11 against 67 buffers; bench/history-retention.mjs, 2,000,000 rows).
 * The times travel as text cast in the statement: a stable cast, so a custom plan cannot prune
 * on it at planning either, its cost is the generic plan's, and the plan cache settles on the
 * generic plan (as timestamptz parameters, every call got a custom plan, planned afresh over
 * 35 partitions: 0.32 ms p50 against 0.13 ms for probing them all; with the cast 0.09 ms).
 * A stale cache stays correct: a partition closed since it was read lies past its C (the open
 * part), and a dropped one matches nothing.
 */
export function historyByIdParamSql(schema: string, cols: string, layout: Exclude<HistoryLayout, 'flat'>): string {
  const s = escapeIdentifier(schema);
  const parts = [
    `SELECT ${cols} FROM ${s}.job_history_failed WHERE id = $1`,
    `SELECT ${cols} FROM ${s}.job_history_done WHERE id = $1 AND (finished_at >= $2::text::timestamptz
       OR (finished_at >= $3::text::timestamptz AND finished_at < $4::text::timestamptz)
       OR (finished_at >= $5::text::timestamptz AND finished_at < $6::text::timestamptz))`,
    `SELECT ${cols} FROM ${s}.job_history_done_default WHERE id = $1 AND finished_at < $2::text::timestamptz`,
  ];
  if (layout === 'partitioned-legacy') parts.push(`SELECT ${cols} FROM ${s}.job_history_legacy WHERE id = $1`);
  return parts.join('\n      UNION ALL\n      ');
}

/** The id range of one closed partition (job_history_id_bounds), finish times in epoch ms. */
export interface ClosedPartition {
  readonly lo: number;
  readonly hi: number;
  readonly minId: bigint | null;
  readonly maxId: bigint | null;
}

/**
 * The values $2-$6 of historyByIdParamSql for `id`: C, the end of the newest closed partition,
 * and the finish-time ranges of the closed partitions whose id range holds the id, as at most
 * two ranges (beyond two, the second covers all the others: more partitions probed, none
 * missed). Pure, unit-tested.
 */
export function idLookup(closed: readonly ClosedPartition[], id: bigint): (Date | '-infinity' | null)[] {
  const c = closed.reduce((m, p) => Math.max(m, p.hi), -Infinity);
  const hits = closed
    .filter((p) => p.minId !== null && p.maxId !== null && p.minId <= id && id <= p.maxId)
    .sort((a, b) => a.lo - b.lo);
  const ranges: [number, number][] = hits.slice(0, 1).map((p) => [p.lo, p.hi]);
  if (hits.length > 1) ranges.push([Math.min(...hits.slice(1).map((p) => p.lo)), Math.max(...hits.slice(1).map((p) => p.hi))]);
  const out: (Date | '-infinity' | null)[] = [c === -Infinity ? '-infinity' : new Date(c)];
  for (let i = 0; i < 2; i++) out.push(ranges[i] ? new Date(ranges[i][0]) : null, ranges[i] ? new Date(ranges[i][1]) : null);
  return out;
}

/** How long the cached id ranges are used before they are read again. */
const BOUNDS_TTL_MS = 60_000;

/** How long a `flat` answer is trusted before it is asked again (the conversion may have run). */
const FLAT_RECHECK_MS = 60_000;

/**
 * The history's layout, asked once and remembered: the conversion only ever moves it from flat
 * to partitioned, so a remembered answer names no table that is gone (a flat one is asked
 * again after a minute). `forget()` after a statement failed on a missing table.
 */
export class HistoryLayoutCache {
  private layout: HistoryLayout | null = null;
  private askedAt = 0;

  constructor(
    private readonly db: SqlExecutor,
    private readonly schema: string,
  ) {}

  async get(): Promise<HistoryLayout> {
    if (this.layout && (this.layout !== 'flat' || Date.now() - this.askedAt < FLAT_RECHECK_MS)) return this.layout;
    const s = escapeIdentifier(this.schema);
    const [r] = await this.db.query<{ current: boolean; legacy: boolean; bounds: boolean }>(
      `SELECT pg_catalog.to_regclass('${s}.job_history_current') IS NOT NULL AS current,
              pg_catalog.to_regclass('${s}.job_history_legacy') IS NOT NULL AS legacy,
              pg_catalog.to_regclass('${s}.job_history_id_bounds') IS NOT NULL AS bounds`,
      [],
    );
    this.layout = !r.current || !r.bounds ? 'flat' : r.legacy ? 'partitioned-legacy' : 'partitioned';
    this.askedAt = Date.now();
    return this.layout;
  }

  forget(): void {
    this.layout = null;
    this.closed = null;
  }

  private closed: { at: number; list: ClosedPartition[] } | null = null;

  /** The closed partitions' id ranges, read at most once a minute. */
  async closedPartitions(): Promise<ClosedPartition[]> {
    if (this.closed && Date.now() - this.closed.at < BOUNDS_TTL_MS) return this.closed.list;
    const rows = await this.db.query<{ lo: number; hi: number; min_id: string | null; max_id: string | null }>(
      `SELECT extract(epoch FROM lo)::float8 * 1000::float8 AS lo, extract(epoch FROM hi)::float8 * 1000::float8 AS hi, min_id, max_id
       FROM ${escapeIdentifier(this.schema)}.job_history_id_bounds`,
      [],
    );
    const list = rows.map((r) => ({
      lo: r.lo,
      hi: r.hi,
      minId: r.min_id === null ? null : BigInt(r.min_id),
      maxId: r.max_id === null ? null : BigInt(r.max_id),
    }));
    this.closed = { at: Date.now(), list };
    return list;
  }

  /**
   * Runs a read by id of `sqlFor` (one statement per layout, see historyByIdParamSql) through
   * `run`; when it finds nothing in a partitioned history, runs the flat form too, which probes
   * every partition. The id ranges are recorded once a partition looks closed (its period over
   * an hour ago, and no transaction this role can see began before its end), and a history row
   * is stamped with its transaction's start: a transaction of another role, which
   * pg_stat_activity hides, open for over an hour, could still write a row into a closed
   * partition outside its recorded range. Such a row is found here, not missed; only a lookup
   * that finds nothing (an unknown id, or one past retention) pays for every partition.
   */
  async read<R>(
    sqlFor: Readonly<Record<HistoryLayout, string>>,
    id: string,
    run: (sql: string, values: unknown[]) => Promise<R[]>,
  ): Promise<R[]> {
    const { sql, values } = await this.lookup(sqlFor, id);
    const rows = await run(sql, values);
    if (rows.length || sql === sqlFor.flat) return rows;
    return run(sqlFor.flat, [id]);
  }

  /** The statement and values of a read by id of `sql` (one per layout, see historyByIdParamSql). */
  async lookup(sqlFor: Readonly<Record<HistoryLayout, string>>, id: string): Promise<{ sql: string; values: unknown[] }> {
    const layout = await this.get();
    if (layout === 'flat') return { sql: sqlFor.flat, values: [id] };
    return { sql: sqlFor[layout], values: [id, ...idLookup(await this.closedPartitions(), BigInt(id))] };
  }
}

/** A statement failed because a table it names does not exist (42P01). */
export function isUndefinedTable(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === '42P01';
}
