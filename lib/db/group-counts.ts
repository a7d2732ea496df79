import type { GroupCounts, GroupCountsOrder, QueueGroupCounts } from '../core/group-counts';
import type { SqlExecutor } from './executor';
import { schemaSql } from './store-context';

/**
 * The most waiting jobs, and the most running ones, one read of a queue's groups examines. The
 * figures are exact below it and counted over the first GROUP_SCAN_LIMIT due jobs in claim order
 * (and as many running ones) above it, so the read costs the same at 10,000 waiting jobs as at
 * 1,000,000: 10,000 index entries of jobs_claim_idx and their heap rows (group_key is in no index
 * yet), 9 to 15 ms of PostgreSQL CPU with 1,000,000 waiting jobs in 1,000 groups
 * (test/integration/group-counts.int-spec.ts prints the plan).
 */
export const GROUP_SCAN_LIMIT = 10_000;

/**
 * A queue's groups from two bounded scans. `waiting` walks jobs_claim_idx (queue, priority,
 * run_at, id) WHERE state = 'waiting' in the claim's own order from its start, due jobs only, and
 * stops after $2 entries; `active` takes the grouped running jobs, at most $2 (as many as jobs
 * running, which the concurrency bounds), on jobs_active_idx (queue, locked_until) WHERE state =
 * 'active' (migration 21 dropped 17's index of grouped active rows: it cost every grouped claim).
 * Neither index holds group_key, so each entry costs a heap visit: what the LIMIT bounds. Claim
 * order puts the oldest due jobs of each priority first, so a group whose oldest job has waited
 * longest is found first whatever the backlog behind it (within one priority; a lower priority's
 * jobs come after every due job of a higher one). The totals row comes back even with no group
 * (LEFT JOIN), so the caller learns how far the scans went.
 * $1 queue $2 scan limit $3 top $4 'busiest' | 'oldest'
 */
export function groupCountsSql(schema: string): string {
  const { jobs } = schemaSql(schema);
  return `
    WITH waiting AS MATERIALIZED (
      SELECT group_key, run_at FROM ${jobs}
      WHERE queue = $1 AND state = 'waiting' AND run_at <= now() ORDER BY priority, run_at, id LIMIT $2
    ), active AS MATERIALIZED (
      SELECT group_key FROM ${jobs} WHERE queue = $1 AND state = 'active' AND group_key IS NOT NULL LIMIT $2
    ), per_group AS MATERIALIZED (
      SELECT group_key, pg_catalog.sum(waiting)::int AS waiting, pg_catalog.sum(active)::int AS active, pg_catalog.min(oldest) AS oldest
      FROM (
        SELECT group_key, count(*) AS waiting, 0 AS active, pg_catalog.min(run_at) AS oldest
        FROM waiting WHERE group_key IS NOT NULL GROUP BY group_key
        UNION ALL
        SELECT group_key, 0, count(*), NULL FROM active WHERE group_key IS NOT NULL GROUP BY group_key
      ) u GROUP BY group_key
    ), totals AS (
      SELECT (SELECT count(*) FROM waiting)::int AS scanned_waiting, (SELECT count(*) FROM active)::int AS scanned_active,
             count(*)::int AS groups, coalesce(pg_catalog.sum(waiting), 0)::int AS waiting_total,
             coalesce(pg_catalog.sum(active), 0)::int AS active_total
      FROM per_group
    )
    SELECT t.*, g.group_key, g.waiting, g.active,
           extract(epoch FROM now() - g.oldest)::float8 * 1000::float8 AS oldest_waiting_age_ms
    FROM totals t LEFT JOIN LATERAL (
      SELECT * FROM per_group
      ORDER BY CASE WHEN $4::text = 'oldest' THEN oldest END NULLS LAST, waiting + active DESC, oldest NULLS LAST, group_key COLLATE "C"
      LIMIT $3
    ) g ON true`;
}

type Row = {
  scanned_waiting: number;
  scanned_active: number;
  groups: number;
  waiting_total: number;
  active_total: number;
  group_key: string | null;
  waiting: number | null;
  active: number | null;
  oldest_waiting_age_ms: number | null;
};

/** A queue's groups (see groupCountsSql), the first `top` in `orderBy`'s order, and the rest summed. */
export async function readGroupCounts(
  db: SqlExecutor,
  sql: string,
  queue: string,
  top: number,
  orderBy: GroupCountsOrder,
  scanLimit = GROUP_SCAN_LIMIT,
): Promise<QueueGroupCounts> {
  const rows = await db.query<Row>(sql, [queue, scanLimit, top, orderBy]);
  const t = rows[0];
  const groups: GroupCounts[] = rows
    .filter((r) => r.group_key !== null)
    .map((r) => ({
      group: r.group_key as string,
      waiting: r.waiting ?? 0,
      active: r.active ?? 0,
      oldestWaitingAgeMs: r.oldest_waiting_age_ms === null ? null : Math.max(0, Math.round(r.oldest_waiting_age_ms)),
    }));
  const listed = groups.reduce((a, g) => ({ waiting: a.waiting + g.waiting, active: a.active + g.active }), {
    waiting: 0,
    active: 0,
  });
  return {
    queue,
    groups,
    other: {
      groups: t.groups - groups.length,
      waiting: t.waiting_total - listed.waiting,
      active: t.active_total - listed.active,
    },
    complete: t.scanned_waiting < scanLimit && t.scanned_active < scanLimit,
    scanned: { waiting: t.scanned_waiting, active: t.scanned_active },
  };
}
