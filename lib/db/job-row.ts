import type { Job, JobAttemptError, JobProgress, JobState } from '../core/job';
import type { ResolvedBackoff } from '../core/options/resolved';
import type { HistoryLayout } from './history/by-id';

/** Columns every job-returning query selects, in the order `rowToJob` expects (the dashboard reads them too). */
export const LIVE_COLS = `id, queue, name, payload,
  CASE WHEN state = 'waiting' AND run_at > now() THEN 'delayed' ELSE state END AS state,
  priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at, started_at,
  NULL::timestamptz AS finished_at, NULL::jsonb AS result, progress, unique_key, group_key`;
export const HISTORY_COLS = `id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
  backoff, timeout_ms, errors, created_at, started_at, finished_at, result, progress, unique_key, group_key`;
// locked_by: the worker of the final attempt (the dashboard's job page names it). progress and
// trace follow the job into history: its last reported progress, and the trace it belongs to.
// logs: the lines its handlers wrote with job.log() (migration 0012), pruned with the row.
// unique_key too (migration 13): shown on the finished job, though it no longer holds the key.
export const ARCHIVE_COLS = `id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
  backoff, timeout_ms, errors, result, created_at, started_at, finished_at, locked_by, progress, trace, logs, unique_key, group_key`;

/**
 * The archive step of every cancel of waiting jobs (queue.cancel, cancelJobs by ids and by
 * filter): the rows `source` (a CTE of deleted jobs rows) go to history as cancelled, with a
 * CancelJobError naming `caller` added to their errors. One builder, so a column added to
 * ARCHIVE_COLS is carried by all of them or the build fails in one place. Returns id, queue and
 * attempt, what a `cancelled` event publishes (events.ts).
 */
export function archiveCancelledSql(history: string, source: string, caller: string): string {
  if (!/^[a-zA-Z.()]+$/.test(caller)) throw new Error(`archiveCancelledSql: unexpected caller ${caller}`);
  return `INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'cancelled', priority, run_at, attempt, max_attempts, backoff,
               timeout_ms, errors || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('attempt', attempt,
                 'name', 'CancelJobError', 'message', 'Cancelled by ${caller} while waiting.', 'at', now())),
               NULL, created_at, started_at, now(), locked_by, progress, trace, logs, unique_key, group_key
        FROM ${source} RETURNING id, queue, attempt`;
}

/** One statement per history layout. */
export function byLayout(build: (layout: HistoryLayout) => string): Readonly<Record<HistoryLayout, string>> {
  return { flat: build('flat'), partitioned: build('partitioned'), 'partitioned-legacy': build('partitioned-legacy') };
}

/** A job row as the queries return it. */
export interface JobRow {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  state: JobState;
  priority: number;
  run_at: Date;
  attempt: number;
  max_attempts: number;
  backoff: ResolvedBackoff | null;
  timeout_ms: number | null;
  errors: JobAttemptError[];
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  result: unknown;
  progress: JobProgress | null;
  /** NULL for a job added without one (and for a finished job from before migration 13). */
  unique_key: string | null;
  /** NULL for a job added without a group (migration 17). */
  group_key: string | null;
}

export function rowToJob<T>(r: JobRow): Job<T> {
  return {
    id: String(r.id),
    queue: r.queue,
    name: r.name,
    payload: r.payload as T,
    state: r.state,
    priority: r.priority,
    attempt: r.attempt,
    // The running attempt has not ended: BullMQ's attemptsMade leaves it out too.
    attemptsMade: r.state === 'active' ? Math.max(r.attempt - 1, 0) : r.attempt,
    maxAttempts: r.max_attempts,
    runAt: r.run_at,
    createdAt: r.created_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    errors: r.errors ?? [],
    result: (r.result ?? null) as never,
    timeoutMs: r.timeout_ms,
    progress: r.progress ?? null,
    uniqueKey: r.unique_key ?? null,
    group: r.group_key ?? null,
  };
}
