import { rowToJob, type JobRow, type JobStore, type Outcome } from '../db/job-store';
import { JobTimeoutError, UnknownJobNameError } from '../errors';
import type { ActiveJob, Job, JobAttemptError, JobHandler } from '../job';
import type { ResolvedBackoff, ResolvedQueueOptions } from '../pg-queue.options';
import type { Completer } from './completer';
import type { EngineLogger } from './logger';
import { attemptErrorJson, backoffDelayMs, toAttemptError } from './retry-policy';

/** What a worker tells the supervisor as jobs move. */
export interface WorkerEvents {
  active(job: Job): void;
  completed(job: Job, result: unknown): void;
  retrying(job: Job, error: JobAttemptError, delayMs: number): void;
  failed(job: Job, error: JobAttemptError): void;
  error(err: Error): void;
}

export interface QueueWorkerContext {
  readonly store: JobStore;
  readonly completer: Completer;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly pollIntervalMs: number;
  readonly logger: EngineLogger;
  readonly events: WorkerEvents;
}

interface Running {
  readonly job: ActiveJob;
  readonly backoff: ResolvedBackoff;
  readonly controller: AbortController;
  timer: NodeJS.Timeout | null;
  settled: boolean;
}

/**
 * Runs one queue's jobs in this process: claims as many as it has free slots, runs each outside
 * any transaction, and hands outcomes to the completer. Woken by the listener, by its own poll,
 * by a finished job when more may be waiting, and by timers for jobs due later.
 */
export class QueueWorker {
  private readonly running = new Map<string, Running>();
  private fetching = false;
  private mayHaveMore = true;
  private stopping = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private dueTimer: NodeJS.Timeout | null = null;
  private dueAt = Infinity;
  private idleWaiters: (() => void)[] = [];

  constructor(
    readonly queue: ResolvedQueueOptions,
    private readonly handlers: ReadonlyMap<string, JobHandler>,
    private readonly catchAll: JobHandler | undefined,
    private readonly ctx: QueueWorkerContext,
  ) {}

  get runningCount(): number {
    return this.running.size;
  }

  runningIds(): string[] {
    return [...this.running.keys()];
  }

  start(): void {
    this.pollTimer = setInterval(() => this.wake(0), this.ctx.pollIntervalMs);
    this.pollTimer.unref();
    this.wake(0);
  }

  /** A job is (or will be in `dueInMs`) available: claim now, or set a timer for then. */
  wake(dueInMs: number): void {
    if (this.stopping) return;
    if (dueInMs <= 0) {
      this.mayHaveMore = true;
      void this.fetch();
      return;
    }
    const at = Date.now() + dueInMs;
    if (at >= this.dueAt) return;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    this.dueAt = at;
    this.dueTimer = setTimeout(() => {
      this.dueTimer = null;
      this.dueAt = Infinity;
      this.wake(0);
    }, dueInMs + 5);
    this.dueTimer.unref();
  }

  private async fetch(): Promise<void> {
    while (!this.stopping && !this.fetching && this.mayHaveMore) {
      const free = this.queue.concurrency - this.running.size;
      if (free <= 0) return;
      this.fetching = true;
      let rows: JobRow[];
      try {
        rows = await this.ctx.store.claim(this.queue.name, free, this.ctx.workerId, this.ctx.leaseMs);
      } catch (err) {
        // The database is unreachable or restarting: the poll timer tries again.
        this.ctx.events.error(err as Error);
        return;
      } finally {
        this.fetching = false;
      }
      this.mayHaveMore = rows.length === free;
      rows.sort((a, b) => a.priority - b.priority || +a.run_at - +b.run_at);
      for (const row of rows) this.run(row);
      if (this.stopping) return;
    }
  }

  private run(row: JobRow): void {
    const controller = new AbortController();
    const job: ActiveJob = { ...rowToJob(row), signal: controller.signal };
    const backoff = isBackoff(row.backoff) ? row.backoff : this.queue.defaultJobOptions.backoff;
    const entry: Running = { job, backoff, controller, timer: null, settled: false };
    this.running.set(job.id, entry);
    this.ctx.events.active(job);
    const handler = this.handlers.get(job.name) ?? this.catchAll;
    if (job.timeoutMs !== null) {
      const timeoutMs = job.timeoutMs;
      entry.timer = setTimeout(() => {
        const err = new JobTimeoutError(timeoutMs);
        controller.abort(err);
        this.settle(entry, err, false);
      }, timeoutMs);
    }
    Promise.resolve()
      .then(() => {
        if (!handler) throw new UnknownJobNameError(job.queue, job.name, [...this.handlers.keys()]);
        return handler(job);
      })
      .then(
        (result) => this.settle(entry, result, true),
        (err: unknown) => this.settle(entry, err, false),
      );
  }

  private settle(entry: Running, value: unknown, ok: boolean): void {
    if (entry.settled) return;
    entry.settled = true;
    if (entry.timer) clearTimeout(entry.timer);
    this.running.delete(entry.job.id);
    const { job } = entry;
    let outcome: Outcome;
    if (ok) {
      let resultJson: string | null = null;
      try {
        resultJson = value === undefined ? null : (JSON.stringify(value) ?? null);
      } catch {
        this.ctx.logger.warn(`Result of job ${job.id} (${job.queue}/${job.name}) is not JSON-serialisable; storing null`);
      }
      if (resultJson?.includes('\\u0000')) resultJson = null;
      outcome = { kind: 'completed', id: job.id, attempt: job.attempt, resultJson };
      this.ctx.events.completed(job, value);
    } else {
      const error = toAttemptError(value, job.attempt);
      if (job.attempt < job.maxAttempts) {
        const delayMs = backoffDelayMs(entry.backoff, job.attempt);
        outcome = { kind: 'retry', id: job.id, attempt: job.attempt, errorJson: attemptErrorJson(error), delayMs };
        this.ctx.events.retrying(job, error, delayMs);
        this.wake(delayMs);
      } else {
        outcome = { kind: 'failed', id: job.id, attempt: job.attempt, errorJson: attemptErrorJson(error) };
        this.ctx.events.failed(job, error);
      }
    }
    this.ctx.completer.push(outcome);
    if (this.running.size === 0) this.idleWaiters.splice(0).forEach((w) => w());
    if (this.mayHaveMore) void this.fetch();
  }

  /** Renewing the lease failed: another worker may own the job now, so ask the handler to stop. */
  leaseLost(id: string, reason: Error): void {
    this.running.get(id)?.controller.abort(reason);
  }

  /** Stops claiming. Running jobs go on. */
  stopClaiming(): void {
    this.stopping = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.dueTimer) clearTimeout(this.dueTimer);
    this.pollTimer = this.dueTimer = null;
  }

  /** Resolves when no job runs. */
  idle(): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Abandons the jobs still running at the end of the shutdown grace period: their handlers are
   * aborted and whatever they do later is ignored. Returns their ids, to hand back.
   */
  abandon(reason: Error): string[] {
    const ids: string[] = [];
    for (const entry of this.running.values()) {
      entry.settled = true;
      if (entry.timer) clearTimeout(entry.timer);
      entry.controller.abort(reason);
      ids.push(entry.job.id);
    }
    this.running.clear();
    return ids;
  }
}

function isBackoff(b: unknown): b is ResolvedBackoff {
  return typeof b === 'object' && b !== null && 'type' in b && 'delayMs' in b && 'maxDelayMs' in b;
}
