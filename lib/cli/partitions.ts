import { DEFAULTS } from '../core/options/defaults';
import { HistoryPartitions } from '../db/history/partitions';
import { missingRanges, PARTITIONS_AHEAD, type HistoryPartition } from '../db/history/ranges';
import type { CliDatabase } from './database';
import type { PartitionsSnapshot } from './doctor-findings';

/** The partitions' span: the one most of them have (an app may have set historyPartitionMs), else the default. */
function spanOf(list: readonly HistoryPartition[]): number {
  const counts = new Map<number, number>();
  for (const p of list) counts.set(p.hi - p.lo, (counts.get(p.hi - p.lo) ?? 0) + 1);
  let best = DEFAULTS.historyPartitionMs as number;
  let most = 0;
  for (const [span, n] of counts) if (n > most || (n === most && span > best)) [best, most] = [span, n];
  return best;
}

/** The history's partitions now: which are missing, at the span given or the one they have. */
export async function readPartitions(db: CliDatabase, spanFlag: number | undefined): Promise<PartitionsSnapshot> {
  const h = new HistoryPartitions(db.pool, db.schema, spanFlag ?? DEFAULTS.historyPartitionMs);
  const layout = await h.layout();
  if (!layout.current)
    return { layout: 'legacy', intervalMs: spanFlag ?? DEFAULTS.historyPartitionMs, currentMissing: null, aheadMissing: [] };
  const { floor, list } = await h.partitions();
  const intervalMs = spanFlag ?? spanOf(list);
  const missing = missingRanges(layout.now, intervalMs, list, floor, PARTITIONS_AHEAD);
  const currentMissing = missing.find((r) => r.lo <= layout.now && layout.now < r.hi) ?? null;
  return { layout: 'partitioned', intervalMs, currentMissing, aheadMissing: missing.filter((r) => r.lo > layout.now) };
}

/**
 * Creates the history partitions missing for now and the next intervals, as a node does at boot
 * (HistoryPartitions.ensureAhead), at the span given or the one the existing partitions have.
 */
export async function createPartitions(
  db: CliDatabase,
  spanFlag: number | undefined,
  warn: (m: string) => void,
): Promise<string[]> {
  const { layout, intervalMs } = await readPartitions(db, spanFlag);
  if (layout === 'legacy') return [];
  return new HistoryPartitions(db.pool, db.schema, intervalMs, warn).ensureAhead();
}
