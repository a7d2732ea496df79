import type { Job } from '../core/job';
import type { ResolvedBackoff } from '../core/options/resolved';

/** One job to insert, already validated and serialised. */
export interface NewJobRow {
  queue: string;
  name: string;
  payload: unknown;
  payloadJson: string;
  priority: number;
  runAt: Date | null;
  delayMs: number;
  maxAttempts: number;
  /** null: the worker's queue default applies. */
  backoff: ResolvedBackoff | null;
  timeoutMs: number | null;
  uniqueKey: string | null;
  replaceWaiting: boolean;
  /** `deduplication.key` (lib/db/dedup.ts), or null. */
  dedupKey: string | null;
  /** `deduplication.ttlMs` (0 without a key). */
  dedupTtlMs: number;
  /** The enqueue's trace context as JSON ({ traceparent, tracestate }), or null without an active span. */
  traceJson: string | null;
  /** `group` (docs/groups.md), or null. */
  group: string | null;
}

/** `errors` of every new job: readonly in Job, so one frozen array serves them all. */
const NO_ERRORS: readonly never[] = Object.freeze([]);

/**
 * The Job an insert created, from what was sent and what the database assigned. `runAt`: the
 * due time when the caller has it already (insertedToJobs shares one Date between the jobs of a
 * call due at the same instant, as they share `createdAt`).
 */
export function insertedToJob<T>(n: NewJobRow, id: string, now: Date, runAt?: Date): Job<T> {
  // The same arithmetic as the insert's: run_at = coalesce(runAt, now() + delayMs).
  // Compared as numbers: `date > date` converts both through Symbol.toPrimitive on every job.
  const nowMs = now.getTime();
  runAt ??= n.runAt ?? new Date(nowMs + n.delayMs);
  const runAtMs = runAt.getTime();
  return {
    id,
    queue: n.queue,
    name: n.name,
    // The object the caller passed (parsing 1,000 payloads back cost more than the insert's
    // other client-side work); getJob returns what was stored.
    payload: n.payload as T,
    state: runAtMs > nowMs ? 'delayed' : 'waiting',
    priority: n.priority,
    attempt: 0,
    attemptsMade: 0,
    maxAttempts: n.maxAttempts,
    runAt,
    createdAt: now,
    startedAt: null,
    finishedAt: null,
    errors: NO_ERRORS,
    result: null,
    timeoutMs: n.timeoutMs,
    progress: null,
    uniqueKey: n.uniqueKey,
    group: n.group,
  };
}

/** insertedToJob for each row of one insert (`ids` in the same order), in one pass. */
export function insertedToJobs<T>(rows: readonly NewJobRow[], ids: readonly string[], now: Date): Job<T>[] {
  const out: Job<T>[] = new Array<Job<T>>(rows.length);
  let delayMs = -1;
  let due = now;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (r.runAt === null && r.delayMs !== delayMs) {
      delayMs = r.delayMs;
      due = new Date(now.getTime() + delayMs);
    }
    out[i] = insertedToJob<T>(r, ids[i], now, r.runAt ?? due);
  }
  return out;
}
