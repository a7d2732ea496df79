import type { ClaimedRow, JobStore } from '../db/job-store';
import { toJsonText } from '../db/jsonb';
import { RunningJob } from './active-job';
import { JobSpan } from './job-span';
import { ProgressTracker } from './progress';
import {
  CancelJobError,
  CompleteWithError,
  JobTimeoutError,
  LeaseLostError,
  PgQueueConfigError,
  PgQueuePayloadError,
  SnoozeJobError,
  UnknownJobNameError,
} from '../core/errors';
import { quote } from '../core/input-text';
import { transactionExecutorFor, type SqlExecutor, type TransactionUse } from '../db/executor';
import type { Job, JobHandler, JobProgress, TransactionClient, TransactionManager } from '../core/job';
import type { ResolvedBackoff, ResolvedQueueOptions } from '../core/pg-queue.options';
import type { Completer, PendingOutcome } from './completer';
import type { EngineLogger } from './logger';
import { attemptErrorJson, backoffDelayMs, toAttemptError } from './retry-policy';
import { CLAIM_WINDOW_DEFAULTS, ClaimWindow, type ClaimPlan } from './claim-window';

/**
 * What a worker tells the supervisor as jobs move. The other transitions are reported by the
 * completer, once their outcome is written.
 */
export interface WorkerEvents {
  active(job: Job): void;
  /** The handler completed its job with `completeWith()`, in its own transaction. */
  completed(job: Job, result: unknown): void;
  /** The handler called `job.updateProgress(value)` (fires on every call; writes are throttled). */
  progress(job: Job, value: JobProgress): void;
  error(err: Error): void;
}

export interface QueueWorkerContext {
  readonly store: JobStore;
  readonly completer: Completer;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly pollIntervalMs: number;
  /** job.updateProgress(): one write per job per this many ms, values up to maxProgressBytes. */
  readonly progressIntervalMs: number;
  readonly maxProgressBytes: number;
  readonly logger: EngineLogger;
  readonly events: WorkerEvents;
  /** Checks a `completeWith()` transaction is on this queue's database (an app with more than one). */
  readonly onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor;
}

interface Running {
  readonly job: RunningJob;
  readonly backoff: ResolvedBackoff;
  timer: NodeJS.Timeout | null;
  settled: boolean;
  /** queue.cancel(id) reached it: unless the handler completes anyway, it ends cancelled. */
  cancelRequested: boolean;
  /** completeWith() wrote the completion in the handler's transaction: no outcome is left to write. */
  completedInTransaction: boolean;
  /** completeWith() was called (it may be called once per attempt). */
  completeCalled: boolean;
  readonly startedAt: number;
  /** The handler's OpenTelemetry span; null unless an SDK records spans. */
  span: JobSpan | null;
}

/** Handlers faster than this on average let the worker prefetch. */
const FAST_JOB_MS = 20;
/**
 * Fast handlers claim up to this many ahead. Waiting on claims was what held the drain back:
 * with 50 per claim the no-op drain reached 41 % of the raw-SQL loop (which claims 100), with 100
 * and two claims in flight 76 %, with 200 about 90 % (bench/, 2 cores). A claim of 200 costs
 * little more than one of 50, and buffered jobs go back after MAX_BUFFER_WAIT_MS if they wait.
 */
const MIN_FAST_PREFETCH = 200;
/**
 * Handlers faster than VERY_FAST_JOB_MS on average (no-op-like: a buffer of 600 empties in well
 * under a second at concurrency 10) claim up to VERY_FAST_PREFETCH ahead, in claims of half of
 * it: ~300 rows per claim. The claim goes out the moment the buffer falls to half (refillDue), so
 * the next batch arrives while the rest of the buffer runs. With 400 (claims of ~200 once the
 * refill went out on time) the drain made 1.0 transactions per 100 jobs, with 600 0.7 and 10-20 %
 * less CPU per job; 800 was no better within this machine's noise (issue 13, bench/, drains of
 * 50,000, 2 runs of 3 each).
 */
const VERY_FAST_JOB_MS = 2;
const VERY_FAST_PREFETCH = 600;
/** A prefetched job that waited longer than this for a slot goes back to the queue. */
const MAX_BUFFER_WAIT_MS = 1000;
/**
 * Node's longest timer (about 24.8 days): a longer one fires after 1 ms with a
 * TimeoutOverflowWarning. Jobs may be delayed 100 years; a capped wake-up timer that fires early
 * only claims nothing, and the poll covers the rest.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Runs one queue's jobs in this process: claims as many as it has free slots, runs each outside
 * any transaction, and hands outcomes to the completer. Woken by the listener, by its own poll,
 * by a finished job when more may be waiting, and by timers for jobs due later.
 *
 * Prefetch: while handlers are fast (a moving average under FAST_JOB_MS), the worker also claims
 * a buffer of up to max(4 x concurrency, 200) jobs (600 while they average under VERY_FAST_JOB_MS) and claims again as soon as half of it is used, so the next
 * claim's round trip overlaps the running jobs instead of idling the slots; with concurrency 10
 * and no-op jobs this took the drain from ~850 to many thousands of jobs/s (bench/). Slow
 * handlers switch it off, so a long job never makes buffered jobs wait behind it; a buffered job
 * that still waits over MAX_BUFFER_WAIT_MS is handed back for other workers, and prefetch stops
 * until handlers prove fast again.
 */
/** job.completeWith() outside a transaction would complete the job whatever the caller's writes then do. */
const COMPLETE_WITH: TransactionUse = { caller: 'completeWith()', effect: 'the completion' };

export class QueueWorker {
  private readonly running = new Map<string, Running>();
  /** Prefetched rows, oldest first; `bufferAt[i]` is when `buffer[i]` arrived (a number array: no object per job). */
  private buffer: ClaimedRow[] = [];
  private bufferAt: number[] = [];
  private avgHandlerMs = Infinity;
  private readonly claimsInFlight = new Set<Promise<ClaimedRow[]>>();
  /** Jobs asked for by claims in flight. */
  private requested = 0;
  private fetchScheduled = false;
  private mayHaveMore = true;
  /** Counts wake-ups, so a short claim that started before one does not cancel it. */
  private wakes = 0;
  private stopping = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private staleTimer: NodeJS.Timeout | null = null;
  private dueTimer: NodeJS.Timeout | null = null;
  private dueAt = Infinity;
  /** Fires when the catch-up claim is due, after a claim within the window came back short (claim-window.ts). */
  private fullTimer: NodeJS.Timeout | null = null;
  private readonly window: ClaimWindow;
  /**
   * Set by the due timer, the poll and the start: the next claim that comes back short also asks
   * when the queue's next delayed job is due, and arms the timer for then. The timer holds only
   * the earliest due time announced; a later one (a second delayed job) was dropped and its job
   * waited for the next poll (delays of 1,000 and 1,500 ms ran at 1,016 and 3,001 ms).
   */
  private lookahead = false;
  private idleWaiters: (() => void)[] = [];
  private answeredClaims = 0;
  /** Manual mode (nestjs-pg-queue/testing): no timers, no claims of its own; only `runRound` claims. */
  private manual = false;
  private readonly progress: ProgressTracker;
  /**
   * Settled attempts whose last progress is being written before their outcome is handed on: their
   * leases are still renewed (runningIds), as the completer's pending outcomes are.
   */
  private readonly flushing = new Set<string>();

  constructor(
    readonly queue: ResolvedQueueOptions,
    private readonly handlers: ReadonlyMap<string, JobHandler>,
    private readonly catchAll: JobHandler | undefined,
    private readonly ctx: QueueWorkerContext,
  ) {
    // concurrency 1 keeps every claim full: on one node that queue's order is strict (README, Limits).
    this.window = new ClaimWindow({ ...CLAIM_WINDOW_DEFAULTS, enabled: queue.concurrency > 1 });
    this.progress = new ProgressTracker(
      ctx.store,
      ctx.workerId,
      ctx.progressIntervalMs,
      ctx.maxProgressBytes,
      ctx.events,
      (job) => this.running.get(job.id)?.job === job,
    );
  }

  /** Progress writes that matched no row (the lease was lost, or the job had finished). */
  get unmatchedProgressWrites(): number {
    return this.progress.unmatched;
  }

  /** Claim statements that came back (with jobs or without): each one a look at the queue. */
  get claimsAnswered(): number {
    return this.answeredClaims;
  }

  get runningCount(): number {
    return this.running.size;
  }

  /** Jobs this worker holds a lease on: running and prefetched. */
  runningIds(): string[] {
    return [...this.running.keys(), ...this.flushing, ...this.buffer.map((r) => String(r.id))];
  }

  start(): void {
    // The one timer left referenced: it keeps a worker-only process (an application context
    // with no HTTP server) alive while every connection is down. Unreferenced, such a process
    // exited with code 0 during a PostgreSQL restart (test/chaos, scenario 1). stopClaiming clears it.
    this.pollTimer = setInterval(() => {
      this.lookahead = true;
      this.wake(0);
    }, this.ctx.pollIntervalMs);
    this.staleTimer = setInterval(() => this.returnStaleBuffer(), MAX_BUFFER_WAIT_MS);
    this.staleTimer.unref();
    this.lookahead = true;
    this.wake(0);
  }

  /**
   * Instead of `start`: no poll, no timers, no claims of its own (wake-ups are ignored); jobs run
   * only when `runRound` is called. For deterministic tests (nestjs-pg-queue/testing).
   */
  startManual(): void {
    this.manual = true;
  }

  /**
   * Manual mode: one claim of up to `limit` due jobs (at most the free slots), runs them, and
   * resolves with how many it claimed once none runs any more (their outcomes are then handed to
   * the completer, not yet written).
   */
  async runRound(limit: number = this.queue.concurrency): Promise<number> {
    if (this.stopping) return 0;
    const free = Math.min(limit, this.queue.concurrency - this.running.size);
    if (free <= 0) {
      await this.idle();
      return 0;
    }
    const rows = this.limited
      ? await this.claimLimited(free)
      : await this.ctx.store.claim(this.queue.name, free, this.ctx.workerId, this.ctx.leaseMs);
    this.answeredClaims++;
    rows.sort((a, b) => a.priority - b.priority || a.run_at_ms - b.run_at_ms);
    for (const row of rows) if (!this.stopping) this.run(row);
    await this.idle();
    return rows.length;
  }

  /** A queue with a global limit claims through the serialised path, and never prefetches. */
  private get limited(): boolean {
    return this.queue.globalConcurrency !== null || this.queue.limiter !== null;
  }

  private get prefetch(): number {
    if (this.limited) return 0;
    if (this.avgHandlerMs < VERY_FAST_JOB_MS) return Math.max(4 * this.queue.concurrency, VERY_FAST_PREFETCH);
    return this.avgHandlerMs < FAST_JOB_MS ? Math.max(4 * this.queue.concurrency, MIN_FAST_PREFETCH) : 0;
  }

  private async claimLimited(free: number): Promise<ClaimedRow[]> {
    const { rows, retryInMs } = await this.ctx.store.claimLimited(
      this.queue.name,
      free,
      this.ctx.workerId,
      this.ctx.leaseMs,
      this.queue,
    );
    // The rate limit stopped it: come back when the window lets a job start.
    if (retryInMs !== null) this.wake(retryInMs);
    return rows;
  }

  /** Starts buffered jobs in free slots. */
  private pump(): void {
    if (this.stopping) return;
    while (this.running.size < this.queue.concurrency && this.buffer.length > 0) {
      this.bufferAt.shift();
      this.run(this.buffer.shift()!);
    }
  }

  private returnStaleBuffer(): void {
    const now = Date.now();
    if (this.buffer.length === 0 || now - this.bufferAt[0] < MAX_BUFFER_WAIT_MS) return;
    const ids = this.takeBuffer();
    this.avgHandlerMs = Infinity;
    this.ctx.store.handBack(ids, this.ctx.workerId).catch((err: Error) => this.ctx.events.error(err));
  }

  /**
   * Notifications may have been missed (the listener just connected, or reconnected): claim what
   * is due, and look up the next due time, as the poll does. A delayed job whose NOTIFY was lost
   * otherwise waited for the next poll instead of its own due time.
   */
  catchUp(): void {
    this.lookahead = true;
    this.wake(0);
  }

  /** A job is (or will be in `dueInMs`) available: claim now, or set a timer for then. */
  wake(dueInMs: number): void {
    if (this.stopping || this.manual) return;
    // Negative: a job came back with its old run_at (a hand-back), maybe outside the window.
    if (dueInMs < 0) this.window.restart();
    if (dueInMs <= 0) {
      this.mayHaveMore = true;
      this.wakes++;
      void this.fetch();
      return;
    }
    const at = Date.now() + dueInMs;
    if (at >= this.dueAt) return;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    this.dueAt = at;
    this.dueTimer = setTimeout(
      () => {
        this.dueTimer = null;
        this.dueAt = Infinity;
        this.lookahead = true;
        this.wake(0);
      },
      Math.min(dueInMs + 5, MAX_TIMER_MS),
    );
    this.dueTimer.unref();
  }

  /**
   * One query for when the queue's next delayed job is due (an index probe per priority in use,
   * whatever the backlog); the timer is set for then. Only after a short claim that a timer, the
   * poll or the start began, so a busy or NOTIFY-driven queue never runs it.
   */
  private async armForNextDue(): Promise<void> {
    if (this.stopping) return;
    try {
      const dueInMs = await this.ctx.store.nextDueInMs(this.queue.name);
      if (dueInMs !== null) this.wake(Math.max(1, Math.ceil(dueInMs)));
    } catch (err) {
      this.ctx.events.error(err as Error);
    }
  }

  /**
   * Prefetching, with a claim slot free, jobs still buffered, and the buffer at its refill mark
   * (fetch's own test). An empty buffer (a queue that keeps up with its load, each job started
   * as it comes) keeps the coalesced claim of setImmediate: claiming at every finish there sent
   * a claim per job or two, and in the held-horizon chaos phase (800 jobs/s, 32 slots) the
   * extra claims took pick-up p95 from 7 to 16 ms before the fault and past 20 ms during it.
   */
  private refillDue(): boolean {
    if (this.buffer.length === 0) return false;
    const prefetch = this.prefetch;
    return prefetch > 0 && this.claimsInFlight.size < this.maxClaimsInFlight(prefetch) && this.held < this.refillMark(prefetch);
  }

  /** Fast handlers may have two claims in flight, so the next batch is on its way while this one runs; slow ones need only one. */
  private maxClaimsInFlight(prefetch: number): number {
    return prefetch > 0 ? 2 : 1;
  }

  /** Jobs leased or asked for: running, buffered, and requested by claims in flight. */
  private get held(): number {
    return this.running.size + this.buffer.length + this.requested;
  }

  /** Claim when fewer are held: a slot would otherwise idle, or (prefetching) half the buffer is used. */
  private refillMark(prefetch: number): number {
    return this.queue.concurrency + Math.floor(prefetch / 2);
  }

  private async fetch(): Promise<void> {
    if (this.manual) return;
    // Two claims in flight for fast handlers: the drain was waiting on claims (bench/).
    const maxInFlight = this.maxClaimsInFlight(this.prefetch);
    while (!this.stopping && this.claimsInFlight.size < maxInFlight && this.mayHaveMore) {
      const held = this.held;
      const prefetch = this.prefetch;
      if (held >= this.refillMark(prefetch)) return;
      const free = this.queue.concurrency + prefetch - held;
      this.requested += free;
      const wakesBefore = this.wakes;
      const sentAt = performance.now();
      const plan: ClaimPlan = this.limited ? { kind: 'full' } : this.window.plan(sentAt);
      this.window.sent(plan, sentAt);
      const claim = this.limited ? this.claimLimited(free) : this.claimAs(plan, free);
      this.claimsInFlight.add(claim);
      let rows: ClaimedRow[];
      try {
        rows = await claim;
        this.answeredClaims++;
        if (!this.limited) this.afterClaim(plan, sentAt, free, rows);
      } catch (err) {
        // The database is unreachable or restarting: the poll timer tries again.
        this.ctx.events.error(err as Error);
        return;
      } finally {
        this.requested -= free;
        this.claimsInFlight.delete(claim);
      }
      // A short claim means the queue was empty when it ran; but a job committed meanwhile (its
      // NOTIFY arrived during the claim) may not have been visible to it: claim again then.
      // The catch-up took only what lies outside the window: the jobs the wake-up was for may be
      // inside it, so a claim within the window follows (the loop goes round once more).
      const catchUp = plan.kind === 'outside';
      if (rows.length < free && this.wakes === wakesBefore && !catchUp) this.mayHaveMore = false;
      if (rows.length < free && this.lookahead && !catchUp) {
        this.lookahead = false;
        void this.armForNextDue();
      }
      rows.sort((a, b) => a.priority - b.priority || a.run_at_ms - b.run_at_ms);
      const at = Date.now();
      for (const row of rows) {
        this.buffer.push(row);
        this.bufferAt.push(at);
      }
      if (this.stopping) return;
      this.pump();
    }
  }

  /**
   * job.completeWith() of every job this worker runs: one function, not a closure per job.
   * Once the attempt is settled (handler returned or threw, timeout, cancel, shutdown) this
   * worker no longer runs it: `running` holds an attempt exactly until then.
   */
  private readonly completeIn = async (
    job: RunningJob,
    target: { readonly manager?: TransactionManager; readonly client?: TransactionClient },
    result: unknown,
  ): Promise<void> => {
    const given = transactionExecutorFor(target, COMPLETE_WITH);
    if (!given) throw new PgQueueConfigError('completeWith() needs { manager } or { client } inside your transaction.');
    // A client not yet known to be in a transaction is asked first: a refusal leaves the call unmade.
    await given.ready?.();
    const entry = this.running.get(job.id);
    if (entry?.job !== job) throw new CompleteWithError(job.id, job.attempt, 'attempt-ended', `${job.queue}/${job.name}`);
    if (entry.completeCalled) throw new CompleteWithError(job.id, job.attempt, 'already-called', `${job.queue}/${job.name}`);
    const db = this.ctx.onOwnDatabase ? this.ctx.onOwnDatabase(given) : given;
    // A result JSON cannot carry throws here, before the call counts: the handler may correct it.
    const resultJson = this.resultJson(job, result);
    entry.completeCalled = true;
    // The last progress lands first: the completion moves the row to history with it.
    await this.progress.flush(job);
    if (!(await this.ctx.store.completeInTransaction(db, job.id, this.ctx.workerId, job.attempt, resultJson))) {
      throw new LeaseLostError(job.id);
    }
    entry.completedInTransaction = true;
  };

  /** The full claim, the claim within the window, or the catch-up (claim-window.ts says which). */
  private claimAs(plan: ClaimPlan, free: number): Promise<ClaimedRow[]> {
    const { store, workerId, leaseMs } = this.ctx;
    if (plan.kind === 'full') return store.claim(this.queue.name, free, workerId, leaseMs);
    const side = plan.kind === 'window' ? 'inside' : 'outside';
    return store.claimSince(this.queue.name, free, workerId, leaseMs, plan.fromPriority, plan.windowMs, side);
  }

  private afterClaim(plan: ClaimPlan, sentAt: number, free: number, rows: readonly ClaimedRow[]): void {
    this.window.answered(
      plan,
      sentAt,
      free,
      rows.map((r) => r.priority),
    );
    if (plan.kind === 'window' && rows.length < free) this.armFullClaim();
  }

  /**
   * After a short claim within the window, a job outside it (an old run_at, a new lowest
   * priority) may be waiting with no wake-up to come: send the catch-up when it is next due.
   */
  private armFullClaim(): void {
    if (this.fullTimer || this.stopping) return;
    const inMs = this.window.fullDueInMs(performance.now());
    if (inMs === null) return;
    this.fullTimer = setTimeout(
      () => {
        this.fullTimer = null;
        this.wake(0);
      },
      Math.ceil(inMs) + 1,
    );
    this.fullTimer.unref();
  }

  private run(row: ClaimedRow): void {
    const job = new RunningJob(row, this.queue.name, this.progress, this.ctx.store.flows);
    const backoff = isBackoff(row.backoff) ? row.backoff : this.queue.defaultJobOptions.backoff;
    if (backoff !== row.backoff && row.backoff !== null) {
      const shown = JSON.stringify(row.backoff).slice(0, 200);
      this.ctx.logger.warn(
        `Job ${job.id} (${job.queue}/${job.name}) has an unusable backoff ${shown}; using the queue's default`,
      );
    }
    const entry: Running = {
      job,
      backoff,
      timer: null,
      settled: false,
      cancelRequested: false,
      completedInTransaction: false,
      completeCalled: false,
      startedAt: performance.now(),
      span: null,
    };
    job.completeIn = this.completeIn;
    this.running.set(job.id, entry);
    if (row.cancel_requested) {
      // Cancelled while an earlier attempt ran, and back in the queue since: never run again.
      entry.cancelRequested = true;
      this.settle(entry, new CancelJobError('Cancelled by queue.cancel() while an earlier attempt ran.'), false);
      return;
    }
    this.ctx.events.active(job);
    entry.span = JobSpan.start(job, row.trace);
    const handler = this.handlers.get(job.name) ?? this.catchAll;
    if (job.timeoutMs !== null) {
      const timeoutMs = job.timeoutMs;
      entry.timer = setTimeout(
        () => {
          const err = new JobTimeoutError(timeoutMs);
          job.abort(err);
          this.settle(entry, err, false);
        },
        Math.min(timeoutMs, MAX_TIMER_MS),
      );
    }
    Promise.resolve()
      .then(() => {
        if (!handler) throw new UnknownJobNameError(job.queue, job.name, [...this.handlers.keys()]);
        const span = entry.span;
        return span ? span.run(() => handler(job)) : handler(job);
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
    const took = performance.now() - entry.startedAt;
    this.avgHandlerMs = this.avgHandlerMs === Infinity ? took : 0.9 * this.avgHandlerMs + 0.1 * took;
    const { job } = entry;
    // Events fire once the completer has written the outcome (it reports each row it wrote).
    let outcome: PendingOutcome | null;
    let resultJson: string | null = null;
    if (ok && !entry.completedInTransaction) {
      // A result JSON cannot carry fails the attempt instead of storing something else.
      try {
        resultJson = this.resultJson(job, value);
      } catch (err) {
        ok = false;
        value = err;
      }
    }
    if (ok && entry.completedInTransaction) {
      // Already written, in the handler's transaction.
      outcome = null;
      this.ctx.events.completed(job, value);
    } else if (ok) {
      outcome = { kind: 'completed', id: job.id, attempt: job.attempt, resultJson, job, result: value };
    } else if (value instanceof SnoozeJobError && !entry.cancelRequested && isMs(value.delayMs)) {
      outcome = { kind: 'snoozed', id: job.id, attempt: job.attempt, delayMs: value.delayMs, job };
    } else if (value instanceof CancelJobError || entry.cancelRequested) {
      // A cancelled job ends cancelled whatever its handler threw on the way out (usually the
      // AbortError of an operation the signal stopped); a handler that completes anyway wins above.
      const error = toAttemptError(
        value instanceof CancelJobError ? value : new CancelJobError('Cancelled by queue.cancel() while running.'),
        job.attempt,
      );
      outcome = { kind: 'cancelled', id: job.id, attempt: job.attempt, errorJson: attemptErrorJson(error), job, error };
    } else {
      // A SnoozeJobError whose delay the database cannot add to a timestamp (a subclass, or a
      // delayMs changed after construction) fails the attempt, saying so, instead of reaching the writer.
      const thrown = value instanceof SnoozeJobError ? unusableSnooze(value) : value;
      const error = toAttemptError(thrown, job.attempt);
      if (job.attempt < job.maxAttempts) {
        // The backoff was validated, but the delay is clamped to what the statement accepts anyway.
        const delayMs = Math.min(Math.max(backoffDelayMs(entry.backoff, job.attempt), 0), MAX_DELAY_MS) || 0;
        outcome = { kind: 'retry', id: job.id, attempt: job.attempt, errorJson: attemptErrorJson(error), delayMs, job, error };
      } else {
        const dlq = this.queue.deadLetterQueue;
        outcome = dlq
          ? {
              kind: 'dead-letter',
              id: job.id,
              attempt: job.attempt,
              errorJson: attemptErrorJson(error),
              deadLetterQueue: dlq,
              job,
              error,
            }
          : { kind: 'failed', id: job.id, attempt: job.attempt, errorJson: attemptErrorJson(error), job, error };
      }
    }
    entry.span?.end(outcome ? outcome.kind : 'completed', value);
    if (outcome) this.handOn(job, outcome);
    // Under a global limit a short claim says nothing about the backlog: the slot this job frees
    // may be the one the limit withheld.
    if (this.limited) this.mayHaveMore = true;
    this.pump();
    this.notifyIdle();
    if (this.mayHaveMore && this.refillDue()) {
      // The buffer just fell to its refill mark: claim now. Fast handlers finish one after the
      // other in one chain of microtasks (each finish starts the next buffered job), so a claim
      // left for setImmediate went out only once the whole buffer had run, and the slots idled
      // for its round trip (issue 13: every drain claim came back with ~400 rows, the buffer's
      // whole size; the worker waited on each).
      void this.fetch();
    } else if (this.mayHaveMore && !this.fetchScheduled) {
      // Coalesce: jobs that finish in the same turn free their slots for one claim.
      this.fetchScheduled = true;
      setImmediate(() => {
        this.fetchScheduled = false;
        void this.fetch();
      });
    }
  }

  /**
   * Hands an outcome to the completer; a job that reported progress first gets its latest value
   * written (at most one UPDATE, only for such jobs), so the outcome's write carries it to history.
   */
  private handOn(job: RunningJob, outcome: PendingOutcome): void {
    const flushed = this.progress.flush(job);
    if (!flushed) {
      this.ctx.completer.push(outcome);
      return;
    }
    this.flushing.add(job.id);
    void flushed.then(() => {
      this.flushing.delete(job.id);
      this.ctx.completer.push(outcome);
      this.notifyIdle();
    });
  }

  private notifyIdle(): void {
    if (this.running.size === 0 && this.flushing.size === 0) this.idleWaiters.splice(0).forEach((w) => w());
  }

  /**
   * queue.cancel(id) for a job this worker may hold: a running one gets its signal fired with
   * CancelJobError and ends cancelled; a prefetched one ends cancelled without running.
   */
  cancel(id: string): void {
    const entry = this.running.get(id);
    if (entry) {
      entry.cancelRequested = true;
      entry.job.abort(new CancelJobError('Cancelled by queue.cancel() while running.'));
      return;
    }
    const i = this.buffer.findIndex((r) => String(r.id) === id);
    if (i >= 0) {
      const [row] = this.buffer.splice(i, 1);
      this.bufferAt.splice(i, 1);
      row.cancel_requested = true;
      this.run(row);
    }
  }

  /** Outcomes were written: under a global limit, the running count just dropped; claim again. */
  outcomesWritten(): void {
    if (this.limited && this.running.size < this.queue.concurrency) this.wake(0);
  }

  /** The queue was paused: prefetched jobs go back at once, so no node starts them meanwhile. */
  paused(): void {
    if (this.buffer.length === 0) return;
    const ids = this.takeBuffer();
    this.ctx.store.handBack(ids, this.ctx.workerId).catch((err: Error) => this.ctx.events.error(err));
  }

  /**
   * A handler's result as stored JSON (null for undefined). A result JSON cannot carry faithfully
   * (a Map, NaN, a function, half a surrogate pair...) throws PgQueuePayloadError, which fails the
   * attempt as if the handler had thrown it: stored as null, the result would be lost with nobody
   * told, and whoever reads job.result would take null for what the handler returned.
   */
  private resultJson(job: Job, value: unknown): string | null {
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

  /** Renewing the lease failed: another worker may own the job now, so ask the handler to stop. */
  leaseLost(id: string, reason: Error): void {
    this.running.get(id)?.job.abort(reason);
  }

  /**
   * Stops claiming; running jobs go on. Resolves once a claim already in flight has landed, so
   * its rows are in the buffer for `takeBuffer` rather than arriving after the hand-back.
   */
  async stopClaiming(): Promise<void> {
    this.stopping = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.staleTimer) clearInterval(this.staleTimer);
    if (this.dueTimer) clearTimeout(this.dueTimer);
    if (this.fullTimer) clearTimeout(this.fullTimer);
    this.pollTimer = this.staleTimer = this.dueTimer = this.fullTimer = null;
    await Promise.all([...this.claimsInFlight].map((c) => c.catch(() => undefined)));
  }

  /** Prefetched jobs that have not started: handed back at once on shutdown. */
  takeBuffer(): string[] {
    const ids = this.buffer.map((r) => String(r.id));
    this.buffer = [];
    this.bufferAt = [];
    return ids;
  }

  /** Resolves when no job runs (and every settled attempt's outcome is with the completer). */
  idle(): Promise<void> {
    if (this.running.size === 0 && this.flushing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Abandons the jobs still running at the end of the shutdown grace period: their handlers are
   * aborted and whatever they do later is ignored. Returns their ids, to hand back.
   */
  abandon(reason: Error): string[] {
    const ids: string[] = this.takeBuffer();
    this.progress.forgetAll();
    for (const entry of this.running.values()) {
      entry.settled = true;
      if (entry.timer) clearTimeout(entry.timer);
      entry.span?.end('abandoned', reason);
      entry.job.abort(reason);
      ids.push(entry.job.id);
    }
    this.running.clear();
    return ids;
  }
}

/**
 * A stored backoff the retry policy can use. The library stores only validated ones (or NULL),
 * but a row written by hand may hold any JSON, and a delay that is not a whole number of
 * milliseconds in range used to make the retry statement fail: on every flush, for every outcome
 * batched with it, while heartbeats kept the job active.
 */
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

/** The largest delay the options accept. */
const MAX_DELAY_MS = 2 ** 31 - 1;

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
