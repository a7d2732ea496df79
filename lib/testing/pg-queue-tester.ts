import { Inject, Injectable } from '@nestjs/common';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import type { Job, JobAttemptError, QueueCounts } from '../core/job';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { PgQueueReadApi } from '../core/read-api';

/**
 * One attempt's end, as a test sees it, told apart by `event`: `completed` with the handler's
 * `result`; `failed` (for good) with its `error`; `retrying` with the `error` and the backoff
 * `delayMs` before the next attempt; `cancelled` (a `CancelJobError` or a cancel) with its
 * `error`; `snoozed` (a `SnoozeJobError`) with the `delayMs` it asked for. `job` is the job as its
 * handler got it (state `active`).
 */
export type PgQueueTestOutcome =
  | { readonly event: 'completed'; readonly job: Job; readonly result: unknown }
  | { readonly event: 'failed'; readonly job: Job; readonly error: JobAttemptError }
  | { readonly event: 'retrying'; readonly job: Job; readonly error: JobAttemptError; readonly delayMs: number }
  | { readonly event: 'cancelled'; readonly job: Job; readonly error: JobAttemptError }
  | { readonly event: 'snoozed'; readonly job: Job; readonly delayMs: number };

/** Options of `PgQueueTester.drain`. */
export interface PgQueueDrainOptions {
  /** Only this queue. @default undefined (every queue with a processor in this app, one after the other) */
  readonly queue?: string;
  /**
   * When nothing is due, make delayed jobs, retry backoffs and snoozes due now and go on, so a
   * job's retries run at once. @default false
   */
  readonly makeDue?: boolean;
  /** Throw a `PgQueueError` after this many attempts (a job that retries forever, a loop). @default 1000 */
  readonly maxJobs?: number;
}

/**
 * Drives the app's real workers from a test, on the real database: jobs run only when the test
 * asks (`runNext`, `drain`), and each call resolves once their outcomes are written. Provided by
 * `PgQueueTestingModule.forRoot()`; get it with `app.get(PgQueueTester)`.
 * @example
 * await orders.add('confirm', { orderId: 1 });
 * await tester.drain({ makeDue: true });
 * expect(tester.completed.map((o) => o.job.name)).toEqual(['confirm']);
 */
@Injectable()
export class PgQueueTester {
  private readonly outcomes: PgQueueTestOutcome[] = [];
  private readonly started: Job[] = [];

  constructor(@Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueReadApi) {
    for (const { supervisor: s } of runtime.connections) {
      s.on('active', (job) => this.started.push(job));
      s.on('completed', (job, result) => this.outcomes.push({ event: 'completed', job, result }));
      s.on('failed', (job, error) => this.outcomes.push({ event: 'failed', job, error }));
      s.on('retrying', (job, error, delayMs) => this.outcomes.push({ event: 'retrying', job, error, delayMs }));
      s.on('cancelled', (job, error) => this.outcomes.push({ event: 'cancelled', job, error }));
      s.on('snoozed', (job, delayMs) => this.outcomes.push({ event: 'snoozed', job, delayMs }));
    }
  }

  /** Every attempt's end since the start (or `clear()`), in order. */
  get history(): readonly PgQueueTestOutcome[] {
    return this.outcomes;
  }

  /** Jobs whose handler started, in order (a job retried twice is here three times). */
  get ran(): readonly Job[] {
    return this.started;
  }

  /** Attempts that completed, with what the handler returned. */
  get completed(): readonly Extract<PgQueueTestOutcome, { event: 'completed' }>[] {
    return this.outcomes.filter((o) => o.event === 'completed');
  }

  /** Attempts that failed for good (no attempt left, or moved to the dead-letter queue). */
  get failed(): readonly Extract<PgQueueTestOutcome, { event: 'failed' }>[] {
    return this.outcomes.filter((o) => o.event === 'failed');
  }

  /** Attempts that failed with attempts left: the job was put back for a retry after `delayMs`. */
  get retried(): readonly Extract<PgQueueTestOutcome, { event: 'retrying' }>[] {
    return this.outcomes.filter((o) => o.event === 'retrying');
  }

  /** Attempts that ended cancelled (`CancelJobError`, or `queue.cancel(id)` seen before it ran). */
  get cancelled(): readonly Extract<PgQueueTestOutcome, { event: 'cancelled' }>[] {
    return this.outcomes.filter((o) => o.event === 'cancelled');
  }

  /** Attempts that threw `SnoozeJobError`. */
  get snoozed(): readonly Extract<PgQueueTestOutcome, { event: 'snoozed' }>[] {
    return this.outcomes.filter((o) => o.event === 'snoozed');
  }

  /** Forgets what was recorded so far (e.g. in `beforeEach`). */
  clear(): void {
    this.outcomes.length = 0;
    this.started.length = 0;
  }

  /**
   * Runs one due job (of `queue`, or of the first queue, in registration order, that has one) and
   * resolves once its outcome is written: its outcome, or null when no job was due.
   */
  async runNext(queue?: string): Promise<PgQueueTestOutcome | null> {
    for (const q of this.queuesFor(queue, 'runNext')) {
      const before = this.outcomes.length;
      if ((await this.runtime.connectionOf(q).supervisor.runRound(q, 1)) > 0) return this.outcomes[before] ?? null;
    }
    return null;
  }

  /**
   * Runs due jobs, round after round (each round claims up to the queue's concurrency), until
   * none is due; with `makeDue`, delayed jobs and backoffs are made due whenever nothing else is,
   * so retries run at once. Jobs the handlers enqueue run too. Resolves once every outcome is
   * written, with the outcomes of this call.
   */
  async drain(options: PgQueueDrainOptions = {}): Promise<PgQueueTestOutcome[]> {
    const queues = this.queuesFor(options.queue, 'drain');
    const maxJobs = options.maxJobs ?? 1000;
    const from = this.outcomes.length;
    let total = 0;
    for (;;) {
      let ran = 0;
      for (const q of queues) ran += await this.runtime.connectionOf(q).supervisor.runRound(q);
      total += ran;
      if (total > maxJobs) {
        throw new PgQueueError(
          `PgQueueTester.drain() ran ${total} attempts and jobs are still due (maxJobs ${maxJobs}): a job that retries or ` +
            'snoozes forever, or handlers that keep enqueueing? Raise maxJobs if that many is expected.',
        );
      }
      if (ran > 0) continue;
      if (options.makeDue && (await this.makeDue(options.queue)) > 0) continue;
      return this.outcomes.slice(from);
    }
  }

  /**
   * Makes the waiting jobs of `queue` (default: all queues) that are due later (delay, retry
   * backoff, snooze) due now; returns how many.
   */
  async makeDue(queue?: string): Promise<number> {
    if (queue !== undefined) return this.runtime.connectionOf(queue).store.makeDueWaiting(queue);
    let made = 0;
    for (const c of this.runtime.connections) made += await c.store.makeDueWaiting(null);
    return made;
  }

  /** Counts of one queue (the database's figures: waiting, delayed, active, stalled, failed). */
  async counts(queue: string): Promise<QueueCounts> {
    return this.runtime.queue(queue, 'PgQueueTester.counts').getCounts();
  }

  /** Counts of every queue that has jobs (or failed ones), by name. */
  async allCounts(): Promise<Record<string, QueueCounts>> {
    const out: Record<string, QueueCounts> = {};
    for (const c of this.runtime.connections) Object.assign(out, Object.fromEntries(await c.store.counts(null)));
    return out;
  }

  private queuesFor(queue: string | undefined, method: string): string[] {
    const s = this.runtime.supervisor;
    // The queues with workers, on every connection (each connection's supervisor runs its own).
    const withWorkers = this.runtime.connections.flatMap((c) => c.supervisor.queues);
    if (!s.isManual) {
      throw new PgQueueConfigError(
        `PgQueueTester.${method}(): the workers are not in manual mode. Import PgQueueTestingModule.forRoot() in the ` +
          'testing module, next to the module that imports PgQueueModule.forRoot().',
      );
    }
    if (!s.running) {
      throw new PgQueueConfigError(
        `PgQueueTester.${method}(): the workers are not running. Call app.init() (or moduleRef.init()) first, and do not ` +
          'use the tester after app.close(). A producer-only app (workers: false) has no workers to drive.',
      );
    }
    if (queue === undefined) return withWorkers;
    if (!withWorkers.includes(queue)) {
      throw new PgQueueConfigError(
        `PgQueueTester.${method}('${queue}'): this app has no @Processor for queue "${queue}". ` +
          `Queues with workers: ${withWorkers.length ? withWorkers.map((q) => `"${q}"`).join(', ') : '(none)'}.`,
      );
    }
    return [queue];
  }
}
