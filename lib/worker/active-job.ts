import type { ClaimedRow } from '../db/job-store';
import type { FlowStore } from '../db/flows';
import { CompleteWithError, PgQueueConfigError } from '../core/errors';
import type {
  ActiveJob,
  ChildResult,
  JobAttemptError,
  JobProgress,
  JobState,
  TransactionClient,
  TransactionManager,
} from '../core/job';
import type { StepOptions, TransactionalStepContext } from '../core/steps';

/** Where `log` goes: the worker's JobLogBuffer (one per worker). */
export interface LogSink {
  log(job: RunningJob, line: string): void;
}

/** Where `updateProgress` goes: the worker's ProgressTracker (one per worker, not one per job). */
export interface ProgressSink {
  update(job: RunningJob, value: JobProgress): Promise<void>;
}

/** Where `step`, `sleep` and `waitFor` go: the worker's StepRunner (one per worker). */
export interface StepHost {
  step<T>(
    job: RunningJob,
    name: string,
    fn: (ctx: TransactionalStepContext) => Promise<T> | T,
    options: StepOptions | undefined,
  ): Promise<T>;
  sleep(job: RunningJob, name: string, msOrUntil: number | Date): Promise<void>;
  waitFor<T>(job: RunningJob, name: string, timeoutMs: number | undefined): Promise<T>;
}

/**
 * The job a handler receives. Its AbortController is made only when the handler reads `signal`
 * (most never do): one per job was 5 % of a no-op drain's CPU (node --cpu-prof, bench/).
 */
export class RunningJob<TPayload = unknown> implements ActiveJob<TPayload> {
  readonly id: string;
  readonly queue: string;
  readonly name: string;
  readonly payload: TPayload;
  readonly state: JobState = 'active';
  readonly priority: number;
  readonly attempt: number;
  readonly attemptsMade: number;
  readonly maxAttempts: number;
  readonly runAt: Date;
  readonly createdAt: Date;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null = null;
  readonly errors: readonly JobAttemptError[];
  readonly result: null = null;
  readonly timeoutMs: number | null;
  readonly uniqueKey: string | null;
  /** Its group (every claim returns it), or null when it was added without one. */
  readonly group: string | null;
  /** The latest reported progress: the stored one at claim (kept from an earlier attempt), then each updateProgress value. */
  progress: JobProgress | null;
  /**
   * Set by the worker (one function for all its jobs): completes this attempt in the caller's
   * transaction, or refuses with CompleteWithError once the attempt has ended or after a first call.
   */
  completeIn:
    | ((
        job: RunningJob,
        target: { readonly manager?: TransactionManager; readonly client?: TransactionClient },
        result: unknown,
      ) => Promise<void>)
    | null = null;
  /** Set by the worker: its StepRunner (null where steps are not available). */
  stepsIn: StepHost | null = null;
  /** job.sleep() or job.waitFor() handed the job back to the queue: this attempt's end is written already. */
  parked = false;
  private controller: AbortController | null = null;
  private abortReason: unknown = undefined;
  private aborted = false;

  /** Where childResults() reads: a reference the worker holds anyway, so nothing is allocated per job. */
  private readonly flows: FlowStore | null;

  constructor(
    row: ClaimedRow,
    /** The queue that claimed it (the claim does not return it: it is the claim's own). */
    queue: string,
    private readonly progressSink: ProgressSink | null = null,
    flows: FlowStore | null = null,
    private readonly logSink: LogSink | null = null,
  ) {
    this.flows = flows;
    this.id = String(row.id);
    this.queue = queue;
    this.name = row.name;
    this.payload = row.payload as TPayload;
    this.priority = row.priority;
    this.attempt = row.attempt;
    this.attemptsMade = row.attempt - 1;
    this.maxAttempts = row.max_attempts;
    this.runAt = new Date(row.run_at_ms);
    this.createdAt = new Date(row.created_at_ms ?? row.run_at_ms);
    this.startedAt = new Date(row.started_at_ms);
    this.errors = Array.isArray(row.errors) ? row.errors : [];
    this.timeoutMs = row.timeout_ms;
    this.progress = row.progress ?? null;
    this.uniqueKey = row.unique_key ?? null;
    this.group = row.group_key ?? null;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  completeWith(
    target: { readonly manager?: TransactionManager; readonly client?: TransactionClient },
    result?: unknown,
  ): Promise<void> {
    if (!this.completeIn)
      return Promise.reject(new CompleteWithError(this.id, this.attempt, 'attempt-ended', `${this.queue}/${this.name}`));
    return this.completeIn(this, target, result);
  }

  step<T>(name: string, fn: (ctx: TransactionalStepContext) => Promise<T> | T, options?: StepOptions): Promise<T> {
    return this.stepsIn ? this.stepsIn.step(this, name, fn, options) : Promise.reject(noSteps(this));
  }

  sleep(name: string, msOrUntil: number | Date): Promise<void> {
    return this.stepsIn ? this.stepsIn.sleep(this, name, msOrUntil) : Promise.reject(noSteps(this));
  }

  waitFor<T = unknown>(name: string, options?: { readonly timeoutMs?: number }): Promise<T> {
    return this.stepsIn ? this.stepsIn.waitFor<T>(this, name, options?.timeoutMs) : Promise.reject(noSteps(this));
  }

  /** @internal The step runner's: the job was parked (sleep, waitFor). */
  park(): void {
    this.parked = true;
  }

  childResults<TResult = unknown>(): Promise<ChildResult<TResult>[]> {
    if (!this.flows) return Promise.resolve([]);
    return this.flows.children(this.id, null) as Promise<ChildResult<TResult>[]>;
  }

  updateProgress(value: JobProgress): Promise<void> {
    if (!this.progressSink) return Promise.resolve();
    return this.progressSink.update(this, value);
  }

  log(line: string): void {
    this.logSink?.log(this, line);
  }

  /** @internal The tracker's: what `progress` reads from now on. */
  setProgress(value: JobProgress): void {
    this.progress = value;
  }

  /** Fires the signal (now, or when it is first read). */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }

  toJSON() {
    const {
      controller: _c,
      abortReason: _r,
      aborted: _a,
      completeIn: _i,
      stepsIn: _s,
      parked: _k,
      progressSink: _p,
      flows: _f,
      logSink: _l,
      ...rest
    } = this;
    return rest;
  }
}

function noSteps(job: RunningJob): Error {
  return new PgQueueConfigError(`Job ${job.id} (${job.queue}/${job.name}) runs outside a worker: it has no durable steps.`);
}
