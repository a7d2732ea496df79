import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { PgClientConfig } from '../core/pg-types';
import type { SqlExecutor } from '../db/executor';
import type { JobStore, NodeRow } from '../db/job-store';
import { PgQueueError } from '../core/errors';
import { otelApi } from '../core/telemetry';
import type { JobHandler } from '../core/job';
import type { BatchHandlerEntry } from '../core/batch';
import type { ResolvedPgQueueOptions, ResolvedQueueOptions } from '../core/options/resolved';
import { Completer } from './completer';
import { hintsForWorkers, type ControlHints } from './control-hints';
import { Listener, type ScheduledReconnect } from './listener';
import type { EngineLogger } from './logger';
import { QueueWorker, type WorkerEvents } from './queue-worker';
import { JobsTableVacuum } from './vacuum';
import { HistoryPartitions } from '../db/history/partitions';
import { HistoryUpkeep } from './history-upkeep';
import { Heartbeat } from './heartbeat';
import { StoredLimits } from './stored-limits';
import { JobSchedulerTicker } from './job-scheduler-ticker';
import { Rescuer } from './rescue';
import { removeNodeRow, stopWorkers, withTimeout } from './shutdown';
import { outcomeReports, type SupervisorEventMap } from './supervisor-events';
import type { AppTransaction } from './steps';

export type { OutcomeKind, SupervisorEventMap } from './supervisor-events';

/** How long shutdown waits for a heartbeat or maintenance pass already running. */
const PASS_WAIT_MS = 5000;
/** The handlers of one queue, as discovery found them. */
export interface QueueHandlers {
  readonly queue: ResolvedQueueOptions;
  readonly handlers: ReadonlyMap<string, JobHandler>;
  readonly catchAll?: JobHandler;
  /** `@Process({ name, batch })` handlers, by job name: one call for many jobs (batch-runner.ts). */
  readonly batches?: ReadonlyMap<string, BatchHandlerEntry>;
}

/**
 * Every background service of one process: the listener, a worker per queue, the completer,
 * the heartbeat and the maintenance pass (rescue, prune; history upkeep, vacuum) and the job schedulers' ticker,
 * each of one shape (service.ts). Knows nothing of Nest.
 */
export class Supervisor extends EventEmitter<SupervisorEventMap> {
  /** Identifies this process's leases in `locked_by`. */
  readonly workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly workers = new Map<string, QueueWorker>();
  private readonly completer: Completer;
  private readonly vacuum: JobsTableVacuum;
  /** History partitions: created ahead, dropped past retention (on the elected node). */
  readonly history: HistoryUpkeep;
  private readonly beats: Heartbeat;
  private readonly rescuer: Rescuer;
  private readonly ticker: JobSchedulerTicker;
  private listener: Listener | null = null;
  private hints: ControlHints | null = null;
  /** The queues' stored global concurrency, kept current in every worker (stored-limits.ts). */
  private limits: StoredLimits | null = null;
  private started = false;
  /** This process in the nodes registry. */
  private readonly nodeRow: NodeRow;
  private readonly nodeQueues: { name: string; concurrency: number }[] = [];
  private stopped = false;
  private catchingRejections = false;
  private manual = false;

  constructor(
    private readonly store: JobStore,
    private readonly opts: ResolvedPgQueueOptions,
    private readonly listenConnection: PgClientConfig | null,
    private readonly logger: EngineLogger,
  ) {
    super();
    const report = {
      emit: this.emit.bind(this),
      wake: (queue: string, dueInMs: number) => this.workers.get(queue)?.wake(dueInMs),
    };
    this.completer = new Completer(store, this.workerId, logger, outcomeReports(report, opts, logger), 500, () =>
      this.workers.forEach((w) => w.outcomesWritten()),
    );
    const error = (err: Error) => this.emit('error', err);
    this.ticker = new JobSchedulerTicker(store.schedulers, opts.cronCatchUpMs, opts.pollIntervalMs, logger, error);
    this.vacuum = new JobsTableVacuum(store, opts.vacuumAtDeadTuples, logger);
    this.history = new HistoryUpkeep(
      new HistoryPartitions(store.pool, store.schema, opts.historyPartitionMs, (m) => logger.warn(m)),
      store.retentions,
      logger,
      error,
    );
    this.nodeRow = {
      host: hostname(),
      pid: process.pid,
      startedAt: new Date(),
      heartbeatMs: opts.heartbeatIntervalMs,
      queues: this.nodeQueues,
    };
    const { workerId, workers, nodeRow, completer } = this;
    this.beats = new Heartbeat(
      { store, workerId, leaseMs: opts.leaseMs, nodeRow, workers, pendingIds: () => completer.pendingIds(), error },
      opts.heartbeatIntervalMs,
    );
    this.rescuer = new Rescuer({
      store,
      opts,
      logger,
      history: this.history,
      vacuum: this.vacuum,
      stalled: (job) => this.emit('stalled', job),
      error,
    });
    // An 'error' event without listeners would throw; the engine reports errors, it never crashes on them.
    this.on('error', (err) => this.logger.error(`pg-queue: ${err.message}`, err.stack));
  }

  /**
   * Wraps a handler's `completeWith()` transaction so it is checked to be on this database: set
   * by the runtime of an app with more than one connection, before `addQueue`.
   */
  onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor;

  /**
   * Runs a transactional step in the app's DataSource transaction (`{ manager }` steps): set by
   * the runtime when this connection comes from a TypeORM DataSource, before `addQueue`.
   */
  appTransaction?: AppTransaction;

  /** Adds a queue's worker; call before `start`. */
  addQueue(q: QueueHandlers): void {
    const events: WorkerEvents = {
      active: (job) => this.emit('active', job),
      completed: (job, result) => this.emit('completed', job, result),
      progress: (job, value) => this.emit('progress', job, value),
      error: (err) => this.emit('error', err),
    };
    this.nodeQueues.push({ name: q.queue.name, concurrency: q.queue.concurrency });
    this.workers.set(
      q.queue.name,
      new QueueWorker(q.queue, q.handlers, q.catchAll, {
        store: this.store,
        completer: this.completer,
        workerId: this.workerId,
        leaseMs: this.opts.leaseMs,
        pollIntervalMs: this.opts.pollIntervalMs,
        progressIntervalMs: this.opts.progressIntervalMs,
        maxProgressBytes: this.opts.maxProgressBytes,
        jobLogs: this.opts.jobLogs,
        logger: this.logger,
        events,
        onOwnDatabase: this.onOwnDatabase,
        appTransaction: this.appTransaction,
        batches: q.batches,
      }),
    );
  }

  /** How many jobs of `queue` run at once in this process, or null when it has no worker for it. */
  concurrencyOf(queue: string): number | null {
    return this.workers.get(queue)?.concurrency ?? null;
  }

  /**
   * Sets how many jobs of `queue` run at once in this process (QueueWorker.setConcurrency); the
   * nodes registry shows the new value from the next heartbeat. False when it has no worker for it.
   */
  setConcurrency(queue: string, n: number): boolean {
    const worker = this.workers.get(queue);
    if (!worker) return false;
    worker.setConcurrency(n);
    const entry = this.nodeQueues.find((q) => q.name === queue);
    if (entry) entry.concurrency = n;
    return true;
  }

  get queues(): string[] {
    return [...this.workers.keys()];
  }

  /** True between `start` and `stop`. */
  get running(): boolean {
    return this.started && !this.stopped;
  }

  /**
   * Outcomes this process tried to write that matched no row (the attempt was no longer its own:
   * the lease was lost to another worker), counted since start and logged as they happen.
   */
  get unmatchedOutcomes(): number {
    return this.completer.unmatched;
  }

  /**
   * Claim statements the worker of `queue` in this process has had answered (0 without one):
   * each is a moment at which it looked at the queue, so a test can tell a poll has passed.
   */
  claimsAnswered(queue: string): number {
    return this.workers.get(queue)?.claimsAnswered ?? 0;
  }

  /** The listener's state, or null in poll-only mode. */
  get listenerState(): {
    connected: boolean;
    disconnectedSince: number | null;
    scheduledReconnect: ScheduledReconnect | null;
  } | null {
    const l = this.listener;
    return l
      ? { connected: l.connected, disconnectedSince: l.disconnectedSince, scheduledReconnect: l.scheduledReconnect }
      : null;
  }

  /**
   * Manual mode, for tests (nestjs-pg-queue/testing); call before `start`. `start` then creates
   * the workers with their handlers but starts nothing in the background: no listener, poll,
   * timers, heartbeat, maintenance or scheduler ticks. Jobs run only in `runRound`.
   */
  setManual(): void {
    if (this.started) throw new PgQueueError('Supervisor.setManual() must be called before start().');
    this.manual = true;
  }

  /** True once `setManual` was called. */
  get isManual(): boolean {
    return this.manual;
  }

  /**
   * Manual mode: one round on `queue` (or on every queue, one after the other): each worker claims
   * up to `limit` due jobs (default: its concurrency) and runs them; resolves once they ran and
   * their outcomes are written, with how many ran. Throws if outcomes could not be written.
   */
  async runRound(queue?: string, limit?: number): Promise<number> {
    if (!this.manual) throw new PgQueueError('Supervisor.runRound() needs manual mode (setManual() before start()).');
    if (!this.running) throw new PgQueueError('Supervisor.runRound(): the supervisor is not running (not started, or stopped).');
    const workers = queue === undefined ? [...this.workers.values()] : [this.workers.get(queue)].filter((w) => w !== undefined);
    let ran = 0;
    for (const w of workers) {
      ran += await w.runRound(limit);
      // The next queue's claim (and the caller) must see this round's outcomes in the database.
      const left = await this.completer.drain(Date.now() + Math.max(this.opts.shutdownTimeoutMs, 5000));
      if (left) {
        throw new PgQueueError(`${left} job outcome(s) could not be written (see the log); the test cannot go on.`);
      }
    }
    return ran;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.workers.size > 0) {
      this.limits = new StoredLimits(
        this.store.limits,
        this.workers,
        this.opts.pollIntervalMs,
        (err) => this.emit('error', err),
        { workerId: this.workerId, setConcurrency: (queue, n) => this.setConcurrency(queue, n) },
      );
    }
    if (this.manual) {
      for (const w of this.workers.values()) w.startManual();
      // Tests: the stored limits are read once, before the first round (no timer runs in manual mode).
      await this.limits?.runOnce();
      return;
    }
    if (this.workers.size > 0 && this.listenConnection) {
      // A cancel or pause notification is a hint: acted on once the database confirms it.
      const hints = (this.hints = hintsForWorkers(this.store, this.workers, (err) => this.emit('error', err)));
      this.listener = new Listener({
        connection: this.listenConnection,
        channel: this.store.channel,
        logger: this.logger,
        onWake: (queue, dueInMs) => this.workers.get(queue)?.wake(dueInMs),
        onCancel: (id) => hints.cancelHint(id),
        onPause: (queue) => hints.pauseHint(queue),
        onLimits: (queue) => this.limits?.hint(queue),
        onConnected: () => this.workers.forEach((w) => w.catchUp()),
      });
      // Do not wait for the listener: if it cannot connect, polling carries the load meanwhile.
      this.listener.start();
    }
    if (this.workers.size > 0 && this.opts.handleUnhandledRejections) {
      process.on('unhandledRejection', this.onUnhandledRejection);
      this.catchingRejections = true;
    }
    // Not awaited: the boot goes on. The workers' first claim waits for its first read (one round
    // trip) instead of taking the limited path meanwhile (stored-limits.ts): that path is a
    // transaction of four statements under the queue's lock, claims only `concurrency` jobs and
    // never prefetches, so the first claims of a backlog came in small, slow steps (issue 30).
    // A read that fails, or never answers, still leaves the limited path to the poll timer.
    this.limits?.start();
    for (const w of this.workers.values()) w.start(!this.limits);
    const limits = this.limits;
    if (limits) void limits.firstRead.then(() => this.workers.forEach((w) => w.catchUp()));
    // The optional OpenTelemetry API, when installed, loads now rather than at the first job's
    // span: its require took 54-78 ms on a loaded 2-core machine, all of it between the first
    // claim's answer and the first handler's start (bench/, BENCH_TRACE, issue 30).
    otelApi();
    // The first beat at once: the node shows in the registry from its start, not a heartbeat later.
    if (this.workers.size > 0) this.beats.start();
    this.rescuer.start();
    // Not awaited: a database that is down at boot must not hold the boot; its timer retries.
    this.ticker.start();
  }

  /**
   * One pass of the job schedulers of this database (job-scheduler-ticker.ts): every due tick
   * enqueued once. `now` for tests (default: the database's clock). Resolves with the schedulers advanced.
   */
  tickSchedulers(now?: Date): Promise<number> {
    return this.ticker.runOnce(now);
  }

  /**
   * One heartbeat for every job this process holds, which also keeps this node's row in the
   * registry fresh (heartbeat.ts); the one in flight if any.
   */
  heartbeat(): Promise<void> {
    return this.beats.runOnce();
  }

  /**
   * One maintenance pass (if this node wins the election): rescue expired leases, prune history,
   * vacuum the jobs table when it needs it (rescue.ts).
   */
  maintain(): Promise<void> {
    return this.rescuer.runOnce();
  }

  /**
   * Graceful stop: claim nothing more, let running jobs finish for up to shutdownTimeoutMs, write
   * their outcomes, then hand whatever still runs back to the queue so another worker takes it
   * at once (its interrupted attempt is not counted).
   */
  async stop(): Promise<void> {
    if (!this.started || this.stopped) return;
    this.stopped = true;
    // No history pass starts from now on: this waits only for the one running now.
    const history = this.history.stop();
    const ticks = this.ticker.stop();
    const { store, completer, workerId, logger } = this;
    const deadline = Date.now() + this.opts.shutdownTimeoutMs;
    const shutdown = { store, completer, workerId, logger, shutdownTimeoutMs: this.opts.shutdownTimeoutMs };
    const limits = this.limits?.stop();
    await stopWorkers([...this.workers.values()], shutdown, deadline);
    // Heartbeats went on until here: they renewed the leases of the jobs still finishing.
    const beats = this.beats.stop();
    const passes = this.rescuer.stop();
    if (this.workers.size > 0) await removeNodeRow(store, workerId, beats, logger);
    await this.listener?.stop();
    // A pass the timers started may still run (a vacuum check after the rescue, say): the pool
    // closes after stop() returns, and a pass that outlived it logged "Cannot use a pool after
    // calling end on the pool" (seen in the scale benchmark's shutdowns).
    // Bounded too: a pass stuck on a database that does not answer must not hold shutdown.
    await withTimeout(Promise.all([beats, passes, history, limits, ticks, this.hints?.settled()]), PASS_WAIT_MS);
    // Last: handlers still ran until the jobs were abandoned above.
    if (this.catchingRejections) process.off('unhandledRejection', this.onUnhandledRejection);
    this.catchingRejections = false;
  }

  /**
   * Node ends the process on a rejection nothing handled, and with it every job it runs: one
   * handler's forgotten `await` would take the others down. Reported through 'error' (logged by
   * the listener the constructor adds). The rejection may come from any code in the process,
   * not only a handler; the message says what is likely.
   */
  private readonly onUnhandledRejection = (reason: unknown): void => {
    const err = new PgQueueError(
      `Unhandled promise rejection: ${describeReason(reason)}. The workers keep running ` +
        '(handleUnhandledRejections: true). Most likely a job handler started a promise without awaiting ' +
        'or catching it: await it, or add .catch().',
      { cause: reason },
    );
    // The log should point at the code that rejected, not at this listener.
    if (reason instanceof Error && reason.stack) err.stack = reason.stack;
    this.emit('error', err);
  };
}

/** A rejection reason as text, whatever it is. */
function describeReason(reason: unknown): string {
  try {
    if (reason instanceof Error) return `${reason.name}: ${reason.message}`;
    return typeof reason === 'string' ? reason : (JSON.stringify(reason) ?? String(reason));
  } catch {
    return Object.prototype.toString.call(reason);
  }
}
