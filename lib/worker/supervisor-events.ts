import type { SupervisorEventMap } from '../core/events';
import type { ResolvedPgQueueOptions } from '../core/options/resolved';
import type { OutcomeReport, PendingOutcome } from './completer';
import type { EngineLogger } from './logger';

export type { OutcomeKind, SupervisorEventMap } from '../core/events';

/** Where the outcome reports go: the supervisor's events, and the worker a job due again wakes. */
export interface ReportTarget {
  emit<K extends keyof SupervisorEventMap>(event: K, ...args: SupervisorEventMap[K]): boolean;
  /** Wakes `queue`'s worker for a job due in `dueInMs`. */
  wake(queue: string, dueInMs: number): void;
}

/**
 * What the completer reports, turned into events and log lines: an outcome written fires its
 * event (and a job due again wakes its worker), a dropped one is said and counted, a refused one
 * is logged.
 */
export function outcomeReports(
  target: ReportTarget,
  opts: Pick<ResolvedPgQueueOptions, 'logJobFailures'>,
  logger: EngineLogger,
): OutcomeReport {
  return {
    written: (o) => outcomeWritten(o, target, opts, logger),
    dropped: (o) => {
      const { job } = o;
      logger.warn(
        `Outcome of job ${job.id} (${job.queue}/${job.name}) attempt ${o.attempt} (${o.kind}) not written: the job is no longer ` +
          `this worker's (its lease expired, so the rescuer or another worker has it); dropped`,
      );
      target.emit('outcomeDropped', job, o.kind);
    },
    // The database refused an outcome even alone: the job was failed in its place (or left to its lease).
    refused: (o, err, failedInstead) => {
      const { job } = o;
      logger.error(
        `The database refused the ${o.kind} outcome of job ${job.id} (${job.queue}/${job.name}) attempt ${o.attempt} (${err.message}); ` +
          (failedInstead ? 'the job was failed with an OutcomeRefusedError instead' : 'it runs again once its lease expires'),
      );
      if (failedInstead?.kind === 'failed') target.emit('failed', job, failedInstead.error);
    },
  };
}

/** An outcome was written: its event fires, a failure is logged, a job due again wakes its worker. */
function outcomeWritten(
  o: PendingOutcome,
  target: ReportTarget,
  opts: Pick<ResolvedPgQueueOptions, 'logJobFailures'>,
  logger: EngineLogger,
): void {
  const { job } = o;
  switch (o.kind) {
    case 'completed':
      target.emit('completed', job, o.result);
      return;
    case 'retry':
      if (opts.logJobFailures === 'all') {
        logger.warn(
          `Job ${job.id} (${job.queue}/${job.name}) attempt ${o.attempt}/${job.maxAttempts} failed: ${shown(o.error.message)}; ` +
            `retrying in ${o.delayMs} ms`,
        );
      }
      target.emit('retrying', job, o.error, o.delayMs);
      target.wake(job.queue, o.delayMs);
      return;
    case 'snoozed':
      target.emit('snoozed', job, o.delayMs);
      target.wake(job.queue, o.delayMs);
      return;
    case 'cancelled':
      target.emit('cancelled', job, o.error);
      return;
    default:
      if (opts.logJobFailures !== 'none') {
        const moved = o.kind === 'dead-letter' ? `; moved to dead-letter queue "${o.deadLetterQueue}"` : '';
        // An UnrecoverableError ends a job before its last attempt: the log says so, not "last attempt".
        const when =
          o.attempt < job.maxAttempts
            ? `for good on attempt ${o.attempt}/${job.maxAttempts} (${o.error.name}: not retried)`
            : `on its last attempt (${o.attempt}/${job.maxAttempts})`;
        logger.error(`Job ${job.id} (${job.queue}/${job.name}) failed ${when}: ${shown(o.error.message)}${moved}`, o.error.stack);
      }
      target.emit('failed', job, o.error);
  }
}

/** An error message as a log line shows it: one line, at most 1,000 characters. */
function shown(message: string): string {
  const line = message.replace(/\s*\n\s*/g, ' ');
  return line.length > 1000 ? `${line.slice(0, 1000)}...` : line;
}
