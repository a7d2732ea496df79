import type { Job, JobAttemptError, JobProgress } from './job';

// What the supervisor (lib/worker) emits, as the companions (metrics, testing) and
// @OnQueueEvent handlers read it: here, below both, so a companion needs no worker/ import.

/** A job whose lease expired, as the rescuer found it. */
export interface StalledJob {
  /** The job's id. */
  readonly id: string;
  /** Its queue. */
  readonly queue: string;
  /** Its job name. */
  readonly name: string;
  /** The attempt that stalled. */
  readonly attempt: number;
  /** false when that was its last attempt: it is now failed. */
  readonly willRetry: boolean;
}

/** An attempt's outcome, as `outcomeDropped` names it. */
export type OutcomeKind = 'completed' | 'retry' | 'failed' | 'cancelled' | 'snoozed' | 'dead-letter';

/**
 * Events the supervisor emits, one per job transition. `completed`, `retrying`, `failed`,
 * `cancelled` and `snoozed` fire once the outcome is written, for the rows the write changed.
 */
export interface SupervisorEventMap {
  active: [job: Job];
  /** A handler on this node called `job.updateProgress(value)` (each call; the writes are throttled). */
  progress: [job: Job, progress: JobProgress];
  completed: [job: Job, result: unknown];
  retrying: [job: Job, error: JobAttemptError, delayMs: number];
  failed: [job: Job, error: JobAttemptError];
  /** The job ended cancelled: by `queue.cancel(id)`, or its handler threw `CancelJobError`. */
  cancelled: [job: Job, error: JobAttemptError];
  /** The handler threw `SnoozeJobError`: the job runs again after `delayMs`, the attempt not counted. */
  snoozed: [job: Job, delayMs: number];
  /** A job whose lease expired (its worker died or stalled), found by this node's rescuer. */
  stalled: [job: StalledJob];
  /**
   * An outcome this node wrote matched no row: the attempt's lease was lost (this worker stalled
   * past `leaseMs`, and the rescuer or another worker has the job now), so nothing was changed.
   */
  outcomeDropped: [job: Job, outcome: OutcomeKind];
  /** Jobs enqueued by this process (after the insert returned; a later rollback removes them). */
  enqueued: [queue: string, name: string, count: number];
  error: [error: Error];
}
