/**
 * Where the next batch of a batched operation starts. A batch that only takes "the first N rows
 * that still match" reads again, each time, the index entries the batches before it deleted or
 * moved (dead until VACUUM, and a row skipped while locked stays in front): over a million rows
 * that is a thousand batches each reading further into the same leaf pages, quadratic in all.
 * Each batch here returns the key of the last row it took, and the next one starts after it, as
 * an index bound: every entry is read once.
 */

/**
 * A place in claim order, the order of jobs_claim_idx (queue, priority, run_at, id) WHERE state =
 * 'waiting'. runAt travels as text with its microseconds (a JavaScript Date has milliseconds: a
 * key rounded down would take the same row again, rounded up would pass over its neighbours).
 */
export interface ClaimKey {
  readonly priority: number;
  readonly runAt: string;
  readonly id: string;
}

/**
 * The smallest bigint: where a walk by id starts. A literal bound, not `$n IS NULL OR id > $n`:
 * a generic plan (prepared statements) could not take that as the start of its index scan.
 */
export const ID_START = '-9223372036854775808';

/** Before every waiting job: the smallest priority (a 32-bit integer), the earliest time, the smallest id. */
export const CLAIM_KEY_START: ClaimKey = Object.freeze({ priority: -(2 ** 31), runAt: '-infinity', id: ID_START });

/** run_at as UTC text with microseconds, read back by `afterClaimKey` (as the dashboard's pages do). */
const RUN_AT_TEXT = `pg_catalog.to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')`;

/**
 * The rows after the key in parameters $n, $n+1, $n+2, in claim order: a row comparison the
 * btree takes as the start of its range scan, after the `queue = $1` equality.
 */
export function afterClaimKey(n: number): string {
  return `(priority, run_at, id) > ($${n}::int, $${n + 1}::timestamp AT TIME ZONE 'UTC', $${n + 2}::bigint)`;
}

/** The key of the last row of `picked` (a CTE with id, priority, run_at) in claim order, as a JSON array; NULL when empty. */
export function lastClaimKey(picked: string): string {
  return `(SELECT pg_catalog.json_build_array(priority, ${RUN_AT_TEXT}, id::text) FROM ${picked}
           ORDER BY priority DESC, run_at DESC, id DESC LIMIT 1)`;
}

/** The key `lastClaimKey` returned, or null when the batch took no row. */
export function claimKeyOf(last: [number, string, string] | null): ClaimKey | null {
  return last ? { priority: last[0], runAt: last[1], id: last[2] } : null;
}

/** `key` as the three parameters `afterClaimKey` reads. */
export function claimKeyParams(key: ClaimKey): [number, string, string] {
  return [key.priority, key.runAt, key.id];
}
