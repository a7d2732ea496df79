import { quote, shorten } from './input-text';

/**
 * Base class of every error this library throws. Catch it to tell queue errors from others;
 * `cause` keeps the underlying error where there is one.
 */
export class PgQueueError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A module, queue or job option is invalid. Thrown at boot (or at enqueue for job options). */
export class PgQueueConfigError extends PgQueueError {}

/**
 * A payload cannot be stored: not JSON-serialisable, holds a NUL character or a lone UTF-16
 * surrogate (which jsonb refuses), or is too large.
 */
export class PgQueuePayloadError extends PgQueueError {
  constructor(
    message: string,
    readonly queue: string,
    readonly jobName: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Recorded as the error of an attempt whose job name has no `@Process` handler in this process. */
export class UnknownJobNameError extends PgQueueError {
  constructor(
    readonly queue: string,
    readonly jobName: string,
    readonly knownNames: readonly string[],
  ) {
    // The name comes from the row, which anyone may have written: quoted, and cut if long.
    const literal = jobName.length <= 60 ? `'${JSON.stringify(jobName).slice(1, -1).replace(/'/g, "\\'")}'` : 'that name';
    super(
      `No handler for job ${quote(jobName)} in queue ${quote(queue)}. ` +
        `Add @Process(${literal}) (or a catch-all @Process()) to the @Processor('${queue}') class. ` +
        `Known names: ${knownNames.length ? shorten(knownNames.join(', '), 300) : '(none)'}.`,
    );
  }
}

/** Recorded as the error of an attempt that ran longer than its `timeoutMs`. */
export class JobTimeoutError extends PgQueueError {
  constructor(readonly timeoutMs: number) {
    super(`Job exceeded its timeout of ${timeoutMs} ms; its AbortSignal was fired.`);
  }
}

/**
 * The reason given to a handler's AbortSignal when this worker lost the job's lease (the rescuer
 * handed it to another worker, usually because heartbeats stopped reaching the database).
 */
export class LeaseLostError extends PgQueueError {
  constructor(readonly jobId: string) {
    super(`Lease of job ${jobId} was lost; another worker may run it. Stop work and return.`);
  }
}

/**
 * `job.completeWith()` was refused: the attempt had already ended (`'attempt-ended'`: its handler
 * returned or threw, it timed out, was cancelled, or the worker shut down, so its outcome is
 * already recorded), or completeWith was already called for it (`'already-called'`).
 */
export class CompleteWithError extends PgQueueError {
  constructor(
    readonly jobId: string,
    readonly attempt: number,
    readonly reason: 'attempt-ended' | 'already-called',
    where: string,
  ) {
    super(
      reason === 'attempt-ended'
        ? `job.completeWith() on job ${jobId} (${where}, attempt ${attempt}) came after the attempt had ended (its handler ` +
            `returned or threw, it timed out, was cancelled, or the worker shut down): its outcome is already recorded, and ` +
            `nothing was written. Call completeWith inside the handler, and await it before the handler returns.`
        : `job.completeWith() was called a second time on job ${jobId} (${where}, attempt ${attempt}); only the first ` +
            `call writes the completion (in its transaction), and this one wrote nothing. Call it once per attempt.`,
    );
  }
}

/** The reason given to a handler's AbortSignal when the process shuts down before it finished. */
export class ShutdownError extends PgQueueError {
  constructor() {
    super('Worker is shutting down; the job will be handed back to the queue.');
  }
}

/**
 * Throw from a handler to end its job as cancelled: no retry, whatever attempts are left. Also
 * the reason a handler's AbortSignal carries when `queue.cancel(id)` reached the running job.
 * @example throw new CancelJobError('the order was deleted');
 */
export class CancelJobError extends PgQueueError {
  constructor(reason = 'Job was cancelled.') {
    super(reason);
  }
}

/**
 * Throw from a handler to fail its job for good: the attempt fails and is not retried, whatever
 * attempts are left. The job ends `failed` (or goes to the queue's dead-letter queue), counted as
 * a failure by metrics, health and the `failed` event like any last attempt. BullMQ's
 * `UnrecoverableError`, under the same name. Use `CancelJobError` instead when the job should end
 * `cancelled` (nothing went wrong, it is no longer wanted).
 * @example throw new UnrecoverableError('the card was declined');
 */
export class UnrecoverableError extends PgQueueError {
  constructor(message = 'Job failed with an unrecoverable error; it is not retried.', options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * `queue.obliterate()` was refused: jobs of the queue were running (`activeCount` of them), when
 * it started or because workers claimed some while it ran. Nothing running was touched. Pause the
 * queue and wait for them to finish, then call it again, or pass `{ force: true }`.
 */
export class ObliterateRefusedError extends PgQueueError {
  constructor(
    readonly queue: string,
    readonly activeCount: number,
    during: boolean,
  ) {
    super(
      `queue.obliterate() refused for queue ${quote(queue)}: ${activeCount} job(s) of it ${during ? 'were claimed by workers while it ran and are' : 'are'} running. ` +
        (during ? 'The jobs that were not running and the history are gone; ' : 'Nothing was removed. ') +
        'Pause the queue (queue.pause()) and wait for its running jobs to end, then call obliterate() again, or pass ' +
        '{ force: true } to remove running jobs too (their handlers then see LeaseLostError and their outcome is dropped).',
    );
  }
}

/**
 * Throw from a handler to run the job again after `delayMs` without using an attempt (waiting on
 * something outside, say a rate-limited API that said "try in a minute").
 * @example throw new SnoozeJobError(60_000);
 */
export class SnoozeJobError extends PgQueueError {
  constructor(readonly delayMs: number) {
    super(`Job snoozed for ${delayMs} ms.`);
    if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > 2 ** 31 - 1) {
      throw new PgQueueConfigError(
        `SnoozeJobError delayMs must be a whole number of milliseconds from 0 to 2^31-1 (about 24.8 days), got ${quote(delayMs)}.`,
      );
    }
  }
}

/**
 * A package this part of the library needs is not installed: an optional peer dependency (say
 * `prom-client` for `nestjs-pg-queue/metrics`), or a package an installed peer needs. The
 * message names it and the command that installs it; `cause` is the loader's error.
 */
export class PgQueueMissingPeerError extends PgQueueError {
  constructor(
    /** The package to install. */
    readonly peer: string,
    /** What needs it: an entry point such as `nestjs-pg-queue/metrics`, or another package. */
    readonly neededBy: string,
    options?: { cause?: unknown },
  ) {
    super(
      `${neededBy} needs the package "${peer}", which is not installed (or not where nestjs-pg-queue can resolve it). Install it: npm install ${peer}`,
      options,
    );
  }
}

/**
 * `add(..., { dependsOn })` named a job that cannot be waited on: unknown (never existed, or
 * pruned from history), or finished as failed or cancelled while the dependency says
 * `onFailure: 'fail-parent'`. Nothing was stored. `dependencyId` and `reason` say which and why.
 */
export class DependencyError extends PgQueueError {
  constructor(
    readonly dependencyId: string,
    readonly reason: 'unknown' | 'failed' | 'cancelled',
    message: string,
  ) {
    super(message);
  }
}
