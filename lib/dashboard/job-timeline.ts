import type { JobAttemptError } from '../core/job';
import type { DashboardJob } from '../core/dashboard-reads';

/**
 * One entry of a job's timeline, in the order things happened: `created`, then each attempt
 * once (started -> ended, with its duration), then `due` (the next run of a waiting job) or a
 * `cancelled` event (a cancel while no attempt ran).
 */
export interface TimelineEntry {
  /** When it happened; an attempt: when it started, or ended when its start was not recorded. */
  readonly at: Date | string;
  /** What happened: the job's creation, one attempt, a cancel, a failure, or its next due time. */
  readonly event: 'created' | 'attempt' | 'cancelled' | 'failed' | 'due';
  /** The attempt's number (1-based); 0 for `created`, the next attempt's for `due`. */
  readonly attempt: number;
  /** An attempt's start, on the database's clock; null when not recorded (an earlier attempt). */
  readonly startedAt?: Date | string | null;
  /** An attempt's end; null while it runs. */
  readonly endedAt?: Date | string | null;
  /** endedAt - startedAt, when both are on the database's clock; else null. */
  readonly durationMs?: number | null;
  /** How the attempt ended: `error` (failed, another attempt follows), or the job's final state; `running`. */
  readonly outcome?: 'running' | 'error' | 'completed' | 'failed' | 'cancelled';
  /** The worker (node id) that ran the attempt, where known. */
  readonly node?: string;
  /** The attempt's error, `name: message`, when it failed. */
  readonly error?: string;
  /**
   * 'worker': `endedAt` (or `at`) is the worker's clock, not the database's: the end of an
   * attempt that failed before the latest is known only from its error, which the worker stamps.
   */
  readonly clock?: 'worker';
}

/** An attempt error as stored: times the database stamped, when the outcome statement recorded them. */
// startedAt is null for an attempt whose row had no started_at (a row written by hand).
type StoredError = JobAttemptError & { readonly startedAt?: string | null; readonly endedAt?: string };

const FINISHED = new Set(['completed', 'failed', 'cancelled']);

function ms(a: Date | string, b: Date | string): number {
  return Math.max(0, new Date(b).getTime() - new Date(a).getTime());
}

/**
 * The job's end that no attempt had: a cancel while it waited, or a parent failed by its child
 * before it ran. The database records those with no worker (an attempt's error names the node
 * that ran it, since version 7), under the number of the last attempt made (0 before any).
 */
function noAttemptEnd(e: StoredError): 'cancelled' | 'failed' | null {
  if (e.worker) return null;
  if (e.name === 'CancelJobError') return 'cancelled';
  if (e.name === 'ChildFailedError' || e.attempt < 1) return 'failed';
  return null;
}

/**
 * The job's history as one clock tells it. The row holds the latest attempt's start and the
 * job's end (the database's clock); an earlier attempt is known from its error, stamped by the
 * worker (`clock: 'worker'`) unless the database recorded its start and end.
 */
export function timeline(j: DashboardJob): TimelineEntry[] {
  const errors = j.errors as readonly StoredError[];
  const t: TimelineEntry[] = [{ at: j.createdAt, event: 'created', attempt: 0 }];
  const finished = FINISHED.has(j.state);
  // The error of the row's latest attempt (the one started_at is of), if that attempt is over.
  const last = errors.length - 1;
  const latestIsLastError =
    last >= 0 &&
    j.state !== 'active' &&
    j.state !== 'completed' &&
    errors[last].attempt === j.attempt &&
    noAttemptEnd(errors[last]) === null;
  errors.forEach((e, i) => {
    const node = e.worker ? { node: e.worker } : {};
    const error = `${e.name}: ${e.message}`;
    const end = noAttemptEnd(e);
    if (end) {
      // Written by the database (now()), and for a finished job at its finished_at.
      t.push({ at: i === last && finished && j.finishedAt ? j.finishedAt : e.at, event: end, attempt: e.attempt, error });
      return;
    }
    if (i === last && latestIsLastError) {
      // The row's own times, on the database's clock: its start (null on rows written by hand
      // or before it was recorded) and, for a finished job, its end.
      const startedAt = j.startedAt;
      const endedAt = finished && j.finishedAt ? j.finishedAt : (e.endedAt ?? null);
      const outcome = finished ? (j.state as 'failed' | 'cancelled') : 'error';
      t.push({
        at: startedAt ?? endedAt ?? e.at,
        event: 'attempt',
        attempt: e.attempt,
        startedAt,
        endedAt: endedAt ?? e.at,
        durationMs: startedAt && endedAt ? ms(startedAt, endedAt) : null,
        outcome,
        ...node,
        error,
        ...(endedAt ? {} : { clock: 'worker' as const }),
      });
      return;
    }
    const dbTimes = e.startedAt != null && e.endedAt !== undefined;
    t.push({
      at: e.startedAt ?? e.endedAt ?? e.at,
      event: 'attempt',
      attempt: e.attempt,
      startedAt: e.startedAt ?? null,
      endedAt: e.endedAt ?? e.at,
      durationMs: dbTimes ? ms(e.startedAt as string, e.endedAt as string) : null,
      outcome: 'error',
      ...node,
      error,
      ...(e.endedAt === undefined ? { clock: 'worker' as const } : {}),
    });
  });
  const node = j.lockedBy ? { node: j.lockedBy } : {};
  if (j.state === 'active' && j.startedAt) {
    t.push({
      at: j.startedAt,
      event: 'attempt',
      attempt: j.attempt,
      startedAt: j.startedAt,
      endedAt: null,
      durationMs: null,
      outcome: 'running',
      ...node,
    });
  } else if (j.state === 'completed' && j.startedAt && j.finishedAt) {
    const { startedAt, finishedAt: endedAt } = j;
    t.push({
      at: startedAt,
      event: 'attempt',
      attempt: j.attempt,
      startedAt,
      endedAt,
      durationMs: ms(startedAt, endedAt),
      outcome: 'completed',
      ...node,
    });
  } else if (j.state === 'waiting' || j.state === 'delayed') {
    t.push({ at: j.runAt, event: 'due', attempt: j.attempt + 1 });
  }
  return t;
}
