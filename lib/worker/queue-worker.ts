import type { ClaimedRow } from '../db/job-store';
import type { JobHandler } from '../core/job';
import type { ResolvedQueueOptions } from '../core/options/resolved';
import { ClaimBuffer } from './claim-buffer';
import { Claims } from './claims';
import { JobRunner } from './job-runner';
import type { RunningSet } from './running-set';
import { MAX_BUFFER_WAIT_MS, maxClaimsInFlight, refillMark } from './prefetch';
import { WakeTimer } from './wake-timer';
import type { QueueWorkerContext } from './worker-context';

export type { QueueWorkerContext, WorkerEvents } from './worker-context';

/**
 * Runs one queue's jobs in this process: claims as many as it has free slots, runs each outside
 * any transaction, and hands outcomes to the completer. Woken by the listener, by its own poll,
 * by a finished job when more may be waiting, and by timers for jobs due later.
 *
 * Prefetch: while handlers are fast (prefetch.ts), the worker also claims a buffer of up to
 * max(4 x concurrency, 200) jobs (600 while they are very fast) and claims again as soon as half
 * of it is used, so the next claim's round trip overlaps the running jobs instead of idling the
 * slots; with concurrency 10 and no-op jobs this took the drain from ~850 to many thousands of
 * jobs/s (bench/). Slow handlers switch it off, so a long job never makes buffered jobs wait
 * behind it; a buffered job that still waits over MAX_BUFFER_WAIT_MS is handed back for other
 * workers, and prefetch stops until handlers prove fast again.
 *
 * Its books, each a unit of its own: the claim buffer and the loop's mode (claim-buffer.ts), the
 * attempts running (running-set.ts), the wake-up timers (wake-timer.ts), the claim window
 * (claim-window.ts), the prefetch pace (prefetch.ts); what an attempt's end means is outcome.ts.
 */
export class QueueWorker {
  private readonly buffer = new ClaimBuffer();
  private readonly claims: Claims;
  private readonly runner: JobRunner;
  /** The runner's attempts, read by the loop's arithmetic (`held`, `pump`). */
  private readonly running: RunningSet;
  private fetchScheduled = false;
  /** Counts wake-ups, so a short claim that started before one does not cancel it. */
  private wakes = 0;
  private pollTimer: NodeJS.Timeout | null = null;
  private staleTimer: NodeJS.Timeout | null = null;
  /** For the earliest delayed job announced (`wake` with a delay, `armForNextDue`). */
  private readonly due = new WakeTimer(() => this.catchUp());
  /**
   * Set by the due timer, the poll and the start: the next claim that comes back short also asks
   * when the queue's next delayed job is due, and arms the timer for then. The timer holds only
   * the earliest due time announced; a later one (a second delayed job) was dropped and its job
   * waited for the next poll (delays of 1,000 and 1,500 ms ran at 1,016 and 3,001 ms).
   */
  private lookahead = false;

  /** Jobs run at once here: the queue's `concurrency`, until `setConcurrency` changes it. */
  private slots: number;

  constructor(
    readonly queue: ResolvedQueueOptions,
    handlers: ReadonlyMap<string, JobHandler>,
    catchAll: JobHandler | undefined,
    private readonly ctx: QueueWorkerContext,
  ) {
    this.claims = new Claims(
      queue,
      ctx,
      (dueInMs) => this.wake(dueInMs),
      () => this.slots,
    );
    this.runner = new JobRunner(queue, handlers, catchAll, ctx, () => this.refill());
    this.running = this.runner.running;
    this.slots = queue.concurrency;
  }

  /** Jobs this worker runs at once now. */
  get concurrency(): number {
    return this.slots;
  }

  /**
   * Changes how many jobs run at once, without a restart (BullMQ's `worker.concurrency = n`).
   * Growing claims for the new slots at once. Shrinking lets running jobs finish (no new one
   * starts until fewer than `n` run) and hands prefetched jobs back to the queue, so another
   * node may take them meanwhile; the prefetch and the claim size follow from the new value.
   */
  setConcurrency(n: number): void {
    const before = this.slots;
    this.slots = n;
    if (n < before) this.paused();
    else if (n > before) this.wake(0);
  }

  /** Progress writes that matched no row (the lease was lost, or the job had finished). */
  get unmatchedProgressWrites(): number {
    return this.runner.progress.unmatched;
  }

  /** Claim statements that came back (with jobs or without): each one a look at the queue. */
  get claimsAnswered(): number {
    return this.claims.answered;
  }

  get runningCount(): number {
    return this.running.size;
  }

  /** Jobs this worker holds a lease on: running (or flushing their progress) and prefetched. */
  runningIds(): string[] {
    return [...this.running.ids(), ...this.buffer.ids()];
  }

  /** `claimNow` false: the owner calls `catchUp` for the first claim (the supervisor, once the stored limits are read). */
  start(claimNow = true): void {
    // The one timer left referenced: it keeps a worker-only process (an application context
    // with no HTTP server) alive while every connection is down. Unreferenced, such a process
    // exited with code 0 during a PostgreSQL restart (test/chaos, scenario 1). stopClaiming clears it.
    this.pollTimer = setInterval(() => this.catchUp(), this.ctx.pollIntervalMs);
    this.staleTimer = setInterval(() => this.returnStaleBuffer(), MAX_BUFFER_WAIT_MS);
    this.staleTimer.unref();
    if (claimNow) this.catchUp();
  }

  /**
   * Instead of `start`: no poll, no timers, no claims of its own (wake-ups are ignored); jobs run
   * only when `runRound` is called. For deterministic tests (nestjs-pg-queue/testing).
   */
  startManual(): void {
    this.buffer.manual();
  }

  /**
   * Manual mode: one claim of up to `limit` due jobs (at most the free slots), runs them, and
   * resolves with how many it claimed once none runs any more (their outcomes are then handed to
   * the completer, not yet written).
   */
  async runRound(limit: number = this.concurrency): Promise<number> {
    if (this.buffer.released) return 0;
    const free = Math.min(limit, this.concurrency - this.running.size);
    if (free <= 0) {
      await this.running.idle();
      return 0;
    }
    const rows = await this.claims.sendOnce(free);
    for (const row of rows) if (!this.buffer.released) this.runner.run(row);
    // Batch handlers: this round's jobs make one call now, not after batch.waitMs.
    this.runner.batches?.startAll();
    await this.running.idle();
    return rows.length;
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
    if (!this.buffer.wakeable) return;
    // Negative: a job came back with its old run_at (a hand-back), maybe outside the window.
    if (dueInMs < 0) this.claims.restart();
    if (dueInMs <= 0) {
      this.buffer.woken();
      this.wakes++;
      void this.fetch();
      return;
    }
    this.due.arm(dueInMs, 5);
  }

  /**
   * queue.cancel(id) for a job this worker may hold: a running one gets its signal fired with
   * CancelJobError and ends cancelled; a prefetched one ends cancelled without running.
   */
  cancel(id: string): void {
    if (this.runner.cancel(id)) return;
    const row = this.buffer.remove(id);
    if (row) {
      row.cancel_requested = true;
      this.runner.run(row);
    }
  }

  /**
   * The queue's stored global concurrency, as the database says (stored-limits.ts). Turning
   * limited hands prefetched jobs back (the limited path never prefetches: they would run over
   * the limit); any change claims again under the new rule. Jobs already running finish.
   */
  setStoredGlobalConcurrency(n: number | null): void {
    const before = this.claims.storedGlobal;
    if (before === n) return;
    const wasLimited = this.limited;
    this.claims.storedGlobal = n;
    if (this.limited && !wasLimited) this.paused();
    this.wake(0);
  }

  /** Outcomes were written: under a global or per-group limit, the running count just dropped; claim again. */
  outcomesWritten(): void {
    if ((this.limited || this.claims.grouped) && this.running.size < this.concurrency) this.wake(0);
  }

  /** The queue was paused: prefetched jobs go back at once, so no node starts them meanwhile. */
  paused(): void {
    if (this.buffer.length === 0) return;
    this.handBack(this.buffer.take());
  }

  /** Renewing the lease failed: another worker may own the job now, so ask the handler to stop. */
  leaseLost(id: string, reason: Error): void {
    this.runner.leaseLost(id, reason);
  }

  /**
   * Stops claiming; running jobs go on. Resolves once a claim already in flight has landed, so
   * its rows are in the buffer for `takeBuffer` rather than arriving after the hand-back.
   */
  async stopClaiming(): Promise<void> {
    this.buffer.release();
    // A batch still collecting when shutdown begins never starts: its jobs go back (takeBuffer).
    this.runner.batches?.hold();
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.staleTimer) clearInterval(this.staleTimer);
    this.pollTimer = this.staleTimer = null;
    this.due.clear();
    await this.claims.stop();
  }

  /** Prefetched jobs, and jobs collected for a batch that has not started: handed back at once on shutdown. */
  takeBuffer(): string[] {
    return [...this.buffer.take(), ...this.runner.takeUnstartedBatches()];
  }

  /** Resolves when no job runs (and every settled attempt's outcome is with the completer). */
  idle(): Promise<void> {
    return this.running.idle();
  }

  /**
   * Abandons the jobs still running at the end of the shutdown grace period: their handlers are
   * aborted and whatever they do later is ignored. Returns their ids, to hand back.
   */
  abandon(reason: Error): string[] {
    const ids: string[] = this.takeBuffer();
    this.runner.abandon(reason, ids);
    return ids;
  }

  private get limited(): boolean {
    return this.claims.limited;
  }

  private get prefetch(): number {
    return this.limited ? 0 : this.runner.pace.size(this.concurrency);
  }

  /** Jobs leased or asked for: running, buffered, and requested by claims in flight. */
  private get held(): number {
    return this.running.size + this.buffer.length + this.claims.requested;
  }

  private async fetch(): Promise<void> {
    // Two claims in flight for fast handlers: the drain was waiting on claims (bench/).
    const maxInFlight = maxClaimsInFlight(this.prefetch);
    while (this.buffer.claiming && this.claims.inFlightCount < maxInFlight) {
      const held = this.held;
      const prefetch = this.prefetch;
      if (held >= refillMark(this.concurrency, prefetch)) return;
      const free = this.concurrency + prefetch - held;
      const wakesBefore = this.wakes;
      const sentAt = performance.now();
      const plan = this.claims.plan(sentAt);
      let rows: ClaimedRow[];
      try {
        rows = await this.claims.send(plan, sentAt, free);
      } catch (err) {
        // The database is unreachable or restarting: the poll timer tries again.
        this.ctx.events.error(err as Error);
        return;
      }
      // A short claim means the queue was empty when it ran; but a job committed meanwhile (its
      // NOTIFY arrived during the claim) may not have been visible to it: claim again then.
      // The catch-up took only what lies outside the window: the jobs the wake-up was for may be
      // inside it, so a claim within the window follows (the loop goes round once more).
      const catchUp = plan.kind === 'outside';
      if (rows.length < free && this.wakes === wakesBefore && !catchUp) this.buffer.cameBackShort();
      if (rows.length < free && this.lookahead && !catchUp) {
        this.lookahead = false;
        void this.armForNextDue();
      }
      this.buffer.push(rows, Date.now());
      if (this.buffer.released) return;
      this.pump();
    }
  }

  /**
   * One query for when the queue's next delayed job is due (an index probe per priority in use,
   * whatever the backlog); the timer is set for then. Only after a short claim that a timer, the
   * poll or the start began, so a busy or NOTIFY-driven queue never runs it.
   */
  private async armForNextDue(): Promise<void> {
    if (this.buffer.released) return;
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
    return (
      prefetch > 0 &&
      this.claims.inFlightCount < maxClaimsInFlight(prefetch) &&
      this.held < refillMark(this.concurrency, prefetch)
    );
  }

  /** Starts buffered jobs in free slots. */
  private pump(): void {
    if (this.buffer.released) return;
    while (this.running.size < this.concurrency && this.buffer.length > 0) this.runner.run(this.buffer.shift());
  }

  private returnStaleBuffer(): void {
    const oldest = this.buffer.oldestAt;
    if (oldest === undefined || Date.now() - oldest < MAX_BUFFER_WAIT_MS) return;
    const ids = this.buffer.take();
    this.runner.pace.reset();
    this.handBack(ids);
  }

  private handBack(ids: string[]): void {
    this.ctx.store.handBack(ids, this.ctx.workerId).catch((err: Error) => this.ctx.events.error(err));
  }

  /** A slot just freed: start a buffered job, wake idle waiters, and claim if more may be due. */
  private refill(): void {
    // Under a global limit a short claim says nothing about the backlog: the slot this job frees
    // may be the one the limit withheld.
    // A grouped queue's claim comes back short when its groups are at their limits, likewise.
    if (this.limited || this.claims.grouped) this.buffer.woken();
    this.pump();
    this.running.notifyIdle();
    if (!this.buffer.claiming) return;
    if (this.refillDue()) {
      // The buffer just fell to its refill mark: claim now. Fast handlers finish one after the
      // other in one chain of microtasks (each finish starts the next buffered job), so a claim
      // left for setImmediate went out only once the whole buffer had run, and the slots idled
      // for its round trip (issue 13: every drain claim came back with ~400 rows, the buffer's
      // whole size; the worker waited on each).
      void this.fetch();
    } else if (!this.fetchScheduled) {
      // Coalesce: jobs that finish in the same turn free their slots for one claim.
      this.fetchScheduled = true;
      setImmediate(() => {
        this.fetchScheduled = false;
        void this.fetch();
      });
    }
  }
}
