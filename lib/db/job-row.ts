import type { Job, JobAttemptError, JobProgress, JobState } from '../core/job';
import type { ResolvedBackoff } from '../core/options/resolved';
import type { HistoryLayout } from './history/by-id';

/** Columns every job-returning query selects, in the order `rowToJob` expects (the dashboard reads them too). */
export const LIVE_COLS = `id, queue, name, payload,
  CASE WHEN state = 'waiting' AND run_at > now() THEN 'delayed' ELSE state END AS state,
  priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at, started_at,
  NULL::timestamptz AS finished_at, NULL::jsonb AS result, progress`;
export const HISTORY_COLS = `id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
  backoff, timeout_ms, errors, created_at, started_at, finished_at, result, progress`;
// locked_by: the worker of the final attempt (the dashboard's job page names it). progress and
// trace follow the job into history: its last reported progress, and the trace it belongs to.
// logs: the lines its handlers wrote with job.log() (migration 0012), pruned with the row.
export const ARCHIVE_COLS = `id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
  backoff, timeout_ms, errors, result, created_at, started_at, finished_at, locked_by, progress, trace, logs`;

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
  };
}
