import { escapeIdentifier } from 'pg';
import type { SqlExecutor } from './executor';

/**
 * Which tables the history has (migrations/0010_history_partitions.sql): `flat` before the
 * one-time conversion of a pre-version-10 history (or when unknown), `partitioned` once
 * job_history_current exists, `partitioned-legacy` when the old table is still beside it.
 */
export type HistoryLayout = 'flat' | 'partitioned' | 'partitioned-legacy';

/**
 * A SELECT of `cols` from the history rows with id = `id` (an SQL expression: a parameter, or a
 * column of an outer query for a LATERAL join) that visits only the partitions that can hold
 * it. A partition is chosen by finish time, which an id does not tell, so a plain `WHERE id = $1`
 * probes the id index of every partition (35 with 30 days kept: 98 buffers a lookup, against 12
 * on an empty history; bench/history-retention.mjs). Here:
 * - job_history_failed, and the old table if there is one: always (they hold every finish time);
 * - the ranged partitions not yet closed, and the default partition's rows of their period:
 *   `finished_at >= C` on job_history_done, C the end of the newest closed partition, an
 *   InitPlan value that prunes the older partitions at run time;
 * - the default partition's older rows (finished while no partition covered their time);
 * - of the closed partitions (job_history_id_bounds, migration 11), only those whose recorded
 *   id range holds the id: a nested loop over that small table whose inner side, one finish-time
 *   range per row, is pruned at run time to that one partition (OFFSET 0 keeps the subquery
 *   from being flattened into a join, whose finish-time conditions would then filter rows
 *   of every partition instead of choosing one).
 * Ids are assigned at enqueue and partitions are by finish time, so closed ranges overlap where
 * jobs finished long after their enqueue (a delay, retries): a lookup visits each closed
 * partition whose range holds its id, usually one or two.
 */
export function historyByIdSql(schema: string, cols: string, id: string, layout: HistoryLayout): string {
  const s = escapeIdentifier(schema);
  if (layout === 'flat') return `SELECT ${cols} FROM ${s}.job_history WHERE id = ${id}`;
  const bounds = `${s}.job_history_id_bounds`;
  const closedUntil = `(SELECT coalesce(max(hi), '-infinity') FROM ${bounds})`;
  const parts = [
    `SELECT ${cols} FROM ${s}.job_history_failed WHERE id = ${id}`,
    `SELECT ${cols} FROM ${s}.job_history_done WHERE id = ${id} AND finished_at >= ${closedUntil}`,
    `SELECT ${cols} FROM ${s}.job_history_done_default WHERE id = ${id} AND finished_at < ${closedUntil}`,
    `SELECT h.* FROM ${bounds} b CROSS JOIN LATERAL (
       SELECT ${cols} FROM ${s}.job_history_done WHERE id = ${id} AND finished_at >= b.lo AND finished_at < b.hi OFFSET 0) h
     WHERE ${id} BETWEEN b.min_id AND b.max_id`,
  ];
  if (layout === 'partitioned-legacy') parts.push(`SELECT ${cols} FROM ${s}.job_history_legacy WHERE id = ${id}`);
  return parts.join('\n      UNION ALL\n      ');
}

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
      `SELECT to_regclass('${s}.job_history_current') IS NOT NULL AS current,
              to_regclass('${s}.job_history_legacy') IS NOT NULL AS legacy,
              to_regclass('${s}.job_history_id_bounds') IS NOT NULL AS bounds`,
      [],
    );
    this.layout = !r.current || !r.bounds ? 'flat' : r.legacy ? 'partitioned-legacy' : 'partitioned';
    this.askedAt = Date.now();
    return this.layout;
  }

  forget(): void {
    this.layout = null;
  }
}

/** A statement failed because a table it names does not exist (42P01). */
export function isUndefinedTable(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === '42P01';
}
