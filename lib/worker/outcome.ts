import { toJsonText } from '../db/jsonb';
import { CancelJobError, PgQueueConfigError, PgQueuePayloadError, SnoozeJobError, UnrecoverableError } from '../core/errors';
import { quote } from '../core/input-text';
import type { Job } from '../core/job';
import type { ResolvedBackoff, ResolvedQueueOptions } from '../core/options/resolved';
import type { PendingOutcome } from './completer';
import { attemptErrorJson, backoffDelayMs, toAttemptError } from './retry-policy';

/**
 * What an attempt's end means: the one decision the worker makes about a job, kept pure (no
 * database, no timers, no events) so every branch is tested alone (test/unit/outcome.spec.ts),
 * as River tests its retry decision. The worker reports the facts and writes what this says.
 *
 * How an attempt can end, and where each case lands:
 * - `returned`: the handler resolved. Completed with its result, unless `completeWith()` already
 *   wrote the completion in the handler's transaction (nothing left to write), or the result is
 *   something JSON cannot carry (the attempt fails instead: see `storedResultJson`). A handler
 *   that completes after `queue.cancel(id)` reached it still completes.
 * - `threw`: the handler threw or rejected; the worker also ends an attempt this way when its
 *   timeout passes (JobTimeoutError) and when a job cancelled earlier comes back (CancelJobError).
 *   SnoozeJobError snoozes, CancelJobError (or a cancel request) cancels, UnrecoverableError
 *   fails (or dead-letters) at once whatever attempts are left, anything else retries while
 *   attempts are left, then fails or goes to the dead-letter queue.
 * - `abandoned`: the shutdown grace period ended while it ran. Nothing is written: the job is
 *   handed back to the queue, its interrupted attempt not counted.
 *
 * A lost lease is not a case of its own: the handler's signal fires with LeaseLostError, its end
 * is decided like any other, and the write, guarded by (id, attempt, locked_by, and for a failure
 * the claim's start), matches no row;
 * the completer counts it and reports it dropped.
 */
export type AttemptEnd = 'returned' | 'threw' | 'abandoned';

/** What the worker knows of an attempt when it ends (its running entry: nothing is allocated for the call). */
export interface AttemptFacts {
  readonly job: Job;
  /** The job's backoff, or the queue's default when the stored one is unusable (`usableBackoff`). */
  readonly backoff: ResolvedBackoff;
  /** queue.cancel(id) reached the attempt (or an earlier one, for a job that came back). */
  readonly cancelRequested: boolean;
  /** completeWith() wrote the completion in the handler's transaction. */
  readonly completedInTransaction: boolean;
  /**
   * The started_at of the claim that began the attempt, in epoch ms as the claim returned it
   * (not `job.startedAt`, whose Date drops the microseconds): the failure statements write onto
   * that claim only (db/outcomes.ts, `claimedBy`). Null: not checked.
   */
  readonly claimedAtMs: number | null;
}

/** Where the decision reads the time and chance: a test fixes both. */
export interface OutcomeClock {
  now(): Date;
  random(): number;
}

const SYSTEM_CLOCK: OutcomeClock = { now: () => new Date(), random: Math.random };

/**
 * The decision: an outcome for the completer to write, or one of two ends that write nothing.
 * The failures (retry, failed, dead-letter) also carry `thrown`, what the handler's span records.
 */
export type Decision = PendingOutcome | typeof ALREADY_WRITTEN | typeof HAND_BACK;

/** completeWith() wrote the completion already: only the `completed` event is left. */
export const ALREADY_WRITTEN = Object.freeze({ kind: 'already-written' as const });
/** Shutdown: nothing is written; the job goes back to the queue. */
export const HAND_BACK = Object.freeze({ kind: 'hand-back' as const });

/** The largest delay the options accept. */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * Maps an attempt's end to its outcome. `value` is what the handler returned or threw (the
 * abort reason for `abandoned`). Never throws: whatever the handler returned or threw, the
 * attempt gets an outcome.
 */
export function decideOutcome(
  attempt: AttemptFacts,
  end: AttemptEnd,
  value: unknown,
  queue: Pick<ResolvedQueueOptions, 'deadLetterQueue'>,
  clock: OutcomeClock = SYSTEM_CLOCK,
): Decision {
  if (end === 'abandoned') return HAND_BACK;
  const { job } = attempt;
  let thrown = value;
  if (end === 'returned') {
    if (attempt.completedInTransaction) return ALREADY_WRITTEN;
    try {
      const resultJson = storedResultJson(job, value);
      return { kind: 'completed', id: job.id, attempt: job.attempt, resultJson, job, result: value };
    } catch (err) {
      // A result JSON cannot carry fails the attempt instead of storing something else.
      thrown = err;
    }
  }
  if (thrown instanceof SnoozeJobError && !attempt.cancelRequested && isMs(thrown.delayMs)) {
    return { kind: 'snoozed', id: job.id, attempt: job.attempt, claimedAtMs: attempt.claimedAtMs, delayMs: thrown.delayMs, job };
  }
  if (thrown instanceof CancelJobError || attempt.cancelRequested) {
    // A cancelled job ends cancelled whatever its handler threw on the way out (usually the
    // AbortError of an operation the signal stopped); a handler that completes anyway wins above.
    const error = toAttemptError(
      thrown instanceof CancelJobError ? thrown : new CancelJobError('Cancelled by queue.cancel() while running.'),
      job.attempt,
      clock.now(),
    );
    return {
      kind: 'cancelled',
      id: job.id,
      attempt: job.attempt,
      claimedAtMs: attempt.claimedAtMs,
      errorJson: attemptErrorJson(error),
      job,
      error,
    };
  }
  // UnrecoverableError (BullMQ's name): the last attempt, whatever attempts are left. A subclass
  // counts too, as it does in BullMQ, so an app can have its own kinds of "never retry".
  return failure(attempt, thrown, queue.deadLetterQueue, clock, thrown instanceof UnrecoverableError);
}

/** The attempt failed: retry while attempts are left (and it may be retried), then fail (or dead-letter). */
function failure(
  attempt: AttemptFacts,
  thrown: unknown,
  deadLetterQueue: string | null,
  clock: OutcomeClock,
  final: boolean,
): PendingOutcome {
  const { job, claimedAtMs } = attempt;
  // A SnoozeJobError whose delay the database cannot add to a timestamp (a subclass, or a
  // delayMs changed after construction) fails the attempt, saying so, instead of reaching the writer.
  const error = toAttemptError(thrown instanceof SnoozeJobError ? unusableSnooze(thrown) : thrown, job.attempt, clock.now());
  const errorJson = attemptErrorJson(error);
  if (!final && job.attempt < job.maxAttempts) {
    // The backoff was validated, but the delay is clamped to what the statement accepts anyway.
    const delayMs = Math.min(Math.max(backoffDelayMs(attempt.backoff, job.attempt, clock.random), 0), MAX_DELAY_MS) || 0;
    return {
      kind: 'retry',
      id: job.id,
      attempt: job.attempt,
      claimedAtMs: attempt.claimedAtMs,
      errorJson,
      delayMs,
      job,
      error,
      thrown,
    };
  }
  return deadLetterQueue
    ? { kind: 'dead-letter', id: job.id, attempt: job.attempt, claimedAtMs, errorJson, deadLetterQueue, job, error, thrown }
    : { kind: 'failed', id: job.id, attempt: job.attempt, claimedAtMs, errorJson, job, error, thrown };
}

/**
 * A handler's result as stored JSON (null for undefined). A result JSON cannot carry faithfully
 * (a Map, NaN, a function, half a surrogate pair...) throws PgQueuePayloadError, which fails the
 * attempt as if the handler had thrown it: stored as null, the result would be lost with nobody
 * told, and whoever reads job.result would take null for what the handler returned.
 */
export function storedResultJson(job: Job, value: unknown): string | null {
  if (value === undefined) return null;
  try {
    return toJsonText(value, 'result');
  } catch (err) {
    throw new PgQueuePayloadError(
      `Result of job ${job.id} (${quote(`${job.queue}/${job.name}`)}) cannot be stored as JSON: ${(err as Error).message}. ` +
        `Return plain data (or nothing): the attempt fails instead of storing a different result.`,
      job.queue,
      job.name,
      { cause: err },
    );
  }
}

/**
 * The backoff an attempt retries with: the stored one if the retry policy can use it, else the
 * queue's default (`null` when the stored one was unusable, for the worker to say so). The library
 * stores only validated ones (or NULL), but a row written by hand may hold any JSON, and a delay
 * that is not a whole number of milliseconds in range used to make the retry statement fail: on
 * every flush, for every outcome batched with it, while heartbeats kept the job active.
 */
export function usableBackoff(stored: unknown, fallback: ResolvedBackoff): ResolvedBackoff {
  return isBackoff(stored) ? stored : fallback;
}

function isBackoff(b: unknown): b is ResolvedBackoff {
  if (typeof b !== 'object' || b === null) return false;
  const { type, delayMs, maxDelayMs, jitter } = b as Record<string, unknown>;
  return (
    (type === 'fixed' || type === 'exponential') &&
    isMs(delayMs) &&
    isMs(maxDelayMs) &&
    (jitter === undefined || typeof jitter === 'boolean')
  );
}

/** The range the options accept for a delay. */
function isMs(v: unknown): boolean {
  return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= MAX_DELAY_MS;
}

/** Why a SnoozeJobError with this delay fails its attempt instead. */
function unusableSnooze(e: SnoozeJobError): Error {
  return new PgQueueConfigError(
    `SnoozeJobError delayMs must be a whole number of milliseconds from 0 to ${MAX_DELAY_MS}, got ${String(e.delayMs)}; ` +
      'the attempt failed instead of snoozing.',
    { cause: e },
  );
}
