/** The ranges of job_history_done's partitions: their names, and which are missing. Pure, unit-tested. */

/** Partitions are created for the current interval and this many after it. */
export const PARTITIONS_AHEAD = 2;

/** One partition of job_history_done: [lo, hi) in epoch milliseconds. */
export interface HistoryPartition {
  readonly name: string;
  readonly lo: number;
  readonly hi: number;
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
