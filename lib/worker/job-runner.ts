import type { ClaimedRow } from '../db/job-store';
import { RunningJob } from './active-job';
import { JobSpan } from './job-span';
import { ProgressTracker } from './progress';
import { JobLogBuffer } from './job-logs';
import { CancelJobError, JobTimeoutError, UnknownJobNameError } from '../core/errors';
import type { JobHandler } from '../core/job';
import { BatchRunner } from './batch-runner';
import type { ResolvedQueueOptions } from '../core/options/resolved';
import type { PendingOutcome } from './completer';
import { completeWithFor } from './complete-with';
import { decideOutcome, type AttemptEnd, type Decision, usableBackoff } from './outcome';
import { PrefetchPace } from './prefetch';
import { Attempt, RunningSet } from './running-set';
import { StepRunner } from './steps';
import { MAX_TIMER_MS } from './wake-timer';
import type { QueueWorkerContext } from './worker-context';

/**
 * Runs the attempts of one queue's worker: starts each handler (its span, its timeout), and when
 * the attempt ends asks outcome.ts what that means and hands the outcome to the completer. The
 * worker's loop (queue-worker.ts) decides what to claim and when; `onSettled` tells it a slot freed.
 */
export class JobRunner {
  readonly running = new RunningSet();
  /** How fast handlers have been: how far ahead the loop claims. */
  readonly pace = new PrefetchPace();
  readonly progress: ProgressTracker;
  /** job.log(): the lines of every job of this worker, written together. */
  readonly logs: JobLogBuffer;
  private readonly completeIn: NonNullable<RunningJob['completeIn']>;
  /** job.step(), sleep(), waitFor() of every job of this worker. */
  private readonly steps: StepRunner;
  /** `@Process({ name, batch })` handlers: null when the queue has none. */
  readonly batches: BatchRunner | null;

  constructor(
    private readonly queue: ResolvedQueueOptions,
    private readonly handlers: ReadonlyMap<string, JobHandler>,
    private readonly catchAll: JobHandler | undefined,
    private readonly ctx: QueueWorkerContext,
    /** An attempt settled (its slot is free): the loop's books. */
    private readonly onSettled: () => void,
  ) {
    this.batches = ctx.batches?.size
      ? new BatchRunner(
          queue.name,
          ctx.batches,
          { begin: (entry, trace) => this.begin(entry, trace), settle: (entry, end, value) => this.settle(entry, end, value) },
          ctx.logger,
        )
      : null;
    this.progress = new ProgressTracker(
      ctx.store,
      ctx.workerId,
      ctx.progressIntervalMs,
      ctx.maxProgressBytes,
      ctx.events,
      (job) => this.running.get(job.id)?.job === job,
    );
    this.logs = new JobLogBuffer(
      ctx.store,
      ctx.workerId,
      ctx.progressIntervalMs,
      ctx.jobLogs,
      (err) => ctx.events.error(err),
      (job) => this.running.get(job.id)?.job === job,
    );
    this.completeIn = completeWithFor(this.running, [this.progress, this.logs], ctx);
    this.steps = new StepRunner(ctx.store, ctx.workerId, ctx.logger, [this.progress, this.logs], ctx.appTransaction);
  }

  /**
   * queue.cancel(id) for a job running here: its signal fires with CancelJobError and it ends
   * cancelled. False if it does not run here.
   */
  cancel(id: string): boolean {
    const entry = this.running.get(id);
    if (!entry) return false;
    entry.cancelRequested = true;
    if (this.batches?.dropWaiting(entry)) {
      // Collected for a batch that has not started: it never runs.
      this.settle(entry, 'threw', new CancelJobError('Cancelled by queue.cancel() before its batch started.'));
      return true;
    }
    entry.job.abort(new CancelJobError('Cancelled by queue.cancel() while running.'));
    return true;
  }

  /** Renewing the lease failed: another worker may own the job now, so ask the handler to stop. */
  leaseLost(id: string, reason: Error): void {
    this.running.get(id)?.job.abort(reason);
  }

  /**
   * Abandons the attempts still running (the shutdown grace period ended): their handlers are
   * aborted and whatever they do later is ignored. Pushes their ids onto `ids`, to hand back.
   */
  abandon(reason: Error, ids: string[]): void {
    this.progress.forgetAll();
    this.logs.forgetAll();
    this.running.endAll((entry) => {
      entry.span?.end('abandoned', reason);
      entry.job.abort(reason);
      // Nothing is written for an attempt cut short by shutdown (outcome.ts): the job goes back.
      if (decideOutcome(entry, 'abandoned', reason, this.queue).kind === 'hand-back') ids.push(entry.job.id);
    });
  }

  /**
   * Shutdown: the jobs collected for batches that have not started leave the running set with no
   * outcome; returns their ids, to hand back with the unstarted prefetched ones.
   */
  takeUnstartedBatches(): string[] {
    if (!this.batches) return [];
    this.batches.hold();
    const ids: string[] = [];
    for (const entry of this.batches.takeWaiting()) if (this.running.end(entry)) ids.push(entry.job.id);
    this.running.notifyIdle();
    return ids;
  }

  /** Starts the attempt of a claimed row (or, cancelled meanwhile, ends it cancelled). */
  run(row: ClaimedRow): void {
    const job = new RunningJob(row, this.queue.name, this.progress, this.ctx.store.flows, this.logs);
    const backoff = usableBackoff(row.backoff, this.queue.defaultJobOptions.backoff);
    if (backoff !== row.backoff && row.backoff !== null) {
      const shown = JSON.stringify(row.backoff).slice(0, 200);
      this.ctx.logger.warn(
        `Job ${job.id} (${job.queue}/${job.name}) has an unusable backoff ${shown}; using the queue's default`,
      );
    }
    const entry = new Attempt(job, backoff, row.started_at_ms);
    job.completeIn = this.completeIn;
    job.stepsIn = this.steps;
    this.running.add(entry);
    if (row.cancel_requested) {
      // Cancelled while an earlier attempt ran, and back in the queue since: never run again.
      entry.cancelRequested = true;
      this.settle(entry, 'threw', new CancelJobError('Cancelled by queue.cancel() while an earlier attempt ran.'));
      return;
    }
    if (this.batches?.handles(job.name)) {
      // Holds its slot and lease from now; starts with its batch's call (batch-runner.ts).
      this.batches.add(entry, row.trace);
      return;
    }
    this.begin(entry, row.trace);
    const handler = this.handlers.get(job.name) ?? this.catchAll;
    Promise.resolve()
      .then(() => {
        if (!handler) {
          throw new UnknownJobNameError(job.queue, job.name, [...this.handlers.keys(), ...(this.batches?.names() ?? [])]);
        }
        const span = entry.span;
        return span ? span.run(() => handler(job)) : handler(job);
      })
      .then(
        (result) => this.settle(entry, 'returned', result),
        (err: unknown) => this.settle(entry, 'threw', err),
      );
  }

  /** An attempt's handler starts (alone, or with its batch): its event, its span, its timeout. */
  private begin(entry: Attempt, trace: ClaimedRow['trace']): void {
    const { job } = entry;
    this.ctx.events.active(job);
    entry.span = JobSpan.start(job, trace);
    if (job.timeoutMs !== null) {
      const timeoutMs = job.timeoutMs;
      entry.timer = setTimeout(
        () => {
          const err = new JobTimeoutError(timeoutMs);
          job.abort(err);
          this.settle(entry, 'threw', err);
        },
        Math.min(timeoutMs, MAX_TIMER_MS),
      );
    }
  }

  /** The attempt ended: decide what it means (outcome.ts), hand that on, then keep the loop's books. */
  private settle(entry: Attempt, end: AttemptEnd, value: unknown): void {
    if (!this.running.end(entry)) return;
    this.pace.record(performance.now() - entry.startedAt);
    const { job } = entry;
    if (job.parked) {
      // job.sleep() or job.waitFor() handed the job back already (steps.ts): nothing to write,
      // whatever the handler did after (returned, or threw the JobParkedError or anything else).
      entry.span?.end('parked', undefined);
      this.onSettled();
      return;
    }
    // Events fire once the completer has written the outcome (it reports each row it wrote).
    const outcome = decideOutcome(entry, end, value, this.queue);
    if (outcome.kind === 'already-written') {
      // Already written, in the handler's transaction.
      this.ctx.events.completed(job, value);
      entry.span?.end('completed', value);
    } else if (outcome.kind !== 'hand-back') {
      entry.span?.end(outcome.kind, spanCause(outcome, value));
      this.handOn(job, outcome);
    }
    this.onSettled();
  }

  /**
   * Hands an outcome to the completer; a job that reported progress first gets its latest value
   * written (at most one UPDATE, only for such jobs), and one that logged its last lines (one
   * UPDATE shared with the worker's other jobs), so the outcome's write carries them to history.
   */
  private handOn(job: RunningJob, outcome: PendingOutcome): void {
    const flushed = flushBoth(this.progress.flush(job), this.logs.flush(job));
    if (!flushed) {
      this.ctx.completer.push(outcome);
      return;
    }
    this.running.flushStarted(job.id);
    void flushed.then(() => {
      this.running.flushEnded(job.id);
      this.ctx.completer.push(outcome);
      this.running.notifyIdle();
    });
  }
}

/** Both flushes of an attempt's end (either may be null: nothing to write). */
export function flushBoth(a: Promise<void> | null, b: Promise<void> | null): Promise<void> | null {
  if (a && b) return Promise.all([a, b]).then(() => undefined);
  return a ?? b;
}

/** What the span of a failed attempt records: what was thrown (a result JSON refused: that error). */
function spanCause(outcome: Exclude<Decision, { kind: 'already-written' | 'hand-back' }>, value: unknown): unknown {
  return outcome.kind === 'retry' || outcome.kind === 'failed' || outcome.kind === 'dead-letter' ? outcome.thrown : value;
}
