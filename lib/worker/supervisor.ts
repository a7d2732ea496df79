import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { PgClientConfig } from '../core/pg-types';
import type { SqlExecutor } from '../db/executor';
import type { JobStore, NodeRow } from '../db/job-store';
import type { SupervisorEventMap } from '../core/events';
import { LeaseLostError, PgQueueError, ShutdownError } from '../core/errors';
import type { JobHandler } from '../core/job';
import type { ResolvedPgQueueOptions, ResolvedQueueOptions } from '../core/pg-queue.options';
import { Completer, type PendingOutcome } from './completer';
import { Listener, type ScheduledReconnect } from './listener';
import type { EngineLogger } from './logger';
import { QueueWorker, type WorkerEvents } from './queue-worker';
import { JobsTableVacuum } from './vacuum';
import { HistoryPartitions } from '../db/history-partitions';
import { HistoryUpkeep } from './history-upkeep';
import { CronScheduler, type CronEntry } from './cron';

// The event map is the companions' read API too (metrics, testing), so it lives in core.
export type { OutcomeKind, SupervisorEventMap } from '../core/events';

/** How long shutdown waits to remove this node's registry row. */
const NODE_REMOVAL_WAIT_MS = 2000;
/** How long shutdown waits for a heartbeat or maintenance pass already running. */
const PASS_WAIT_MS = 5000;
/** The handlers of one queue, as discovery found them. */
export interface QueueHandlers {
  readonly queue: ResolvedQueueOptions;
  readonly handlers: ReadonlyMap<string, JobHandler>;
  readonly catchAll?: JobHandler;
}

/**
 * Every background service of one process: the listener, a worker per queue, the completer,
 * the heartbeat and the maintenance pass (rescue, prune). Knows nothing of Nest.
 */
export class Supervisor extends EventEmitter<SupervisorEventMap> {
  /** Identifies this process's leases in `locked_by`. */
  readonly workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly workers = new Map<string, QueueWorker>();
  private readonly completer: Completer;
  private readonly vacuum: JobsTableVacuum;
  /** History partitions: created ahead, dropped past retention (on the elected node). */
  readonly history: HistoryUpkeep;
  private cron: CronScheduler | null = null;
  private listener: Listener | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private maintenanceTimer: NodeJS.Timeout | null = null;
  /** The heartbeat and maintenance passes running now: stop() waits for them before the pool closes. */
  private readonly passes = new Set<Promise<void>>();
  private started = false;
  private beat: Promise<void> | null = null;
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
    this.completer = new Completer(
      store,
      this.workerId,
      logger,
      {
        written: (o) => this.outcomeWritten(o),
        dropped: (o) => this.outcomeDropped(o),
        refused: (o, err, failedInstead) => this.outcomeRefused(o, err, failedInstead),
      },
      500,
      () => this.workers.forEach((w) => w.outcomesWritten()),
    );
    this.vacuum = new JobsTableVacuum(store, opts.vacuumAtDeadTuples, logger);
    this.history = new HistoryUpkeep(
      new HistoryPartitions(store.pool, store.schema, opts.historyPartitionMs),
      opts.retention,
      logger,
    );
    this.nodeRow = {
      host: hostname(),
      pid: process.pid,
      startedAt: new Date(),
      heartbeatMs: opts.heartbeatIntervalMs,
      queues: this.nodeQueues,
    };
    // An 'error' event without listeners would throw; the engine reports errors, it never crashes on them.
    this.on('error', (err) => this.logger.error(`pg-queue: ${err.message}`, err.stack));
  }

  /**
   * Wraps a handler's `completeWith()` transaction so it is checked to be on this database: set
   * by the runtime of an app with more than one connection, before `addQueue`.
   */
  onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor;

  /** The recurring jobs this node schedules; call before `start`. */
  setCron(entries: readonly CronEntry[]): void {
    this.cron = entries.length
      ? new CronScheduler(this.store, entries, this.opts.cronCatchUpMs, this.logger, (err) => this.emit('error', err))
      : null;
  }

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
        logger: this.logger,
        events,
        onOwnDatabase: this.onOwnDatabase,
      }),
    );
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
   * timers, heartbeat, maintenance or cron. Jobs run only in `runRound`.
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
    if (this.manual) {
      for (const w of this.workers.values()) w.startManual();
      return;
    }
    if (this.workers.size > 0 && this.listenConnection) {
      this.listener = new Listener({
        connection: this.listenConnection,
        channel: this.store.channel,
        logger: this.logger,
        onWake: (queue, dueInMs) => this.workers.get(queue)?.wake(dueInMs),
        onCancel: (id) => this.workers.forEach((w) => w.cancel(id)),
        onPause: (queue) => this.workers.get(queue)?.paused(),
        onConnected: () => this.workers.forEach((w) => w.catchUp()),
      });
      // Do not wait for the listener: if it cannot connect, polling carries the load meanwhile.
      void this.listener.start();
    }
    if (this.workers.size > 0 && this.opts.handleUnhandledRejections) {
      process.on('unhandledRejection', this.onUnhandledRejection);
      this.catchingRejections = true;
    }
    for (const w of this.workers.values()) w.start();
    if (this.workers.size > 0) {
      // The first beat at once: the node shows in the registry from its start, not a heartbeat later.
      void this.track(this.heartbeat());
      this.heartbeatTimer = setInterval(() => void this.track(this.heartbeat()), this.opts.heartbeatIntervalMs);
      this.heartbeatTimer.unref();
    }
    this.maintenanceTimer = setInterval(() => void this.track(this.maintain()), this.opts.rescueIntervalMs);
    this.maintenanceTimer.unref();
    // Not awaited: a database that is down at boot must not hold the boot; maintenance retries.
    void this.cron?.start();
  }

  /** Keeps `pass` in `passes` while it runs (it never rejects: each pass reports its own errors). */
  private track(pass: Promise<void>): Promise<void> {
    this.passes.add(pass);
    return pass.finally(() => this.passes.delete(pass));
  }

  /**
   * One heartbeat for every job this process holds, which also keeps this node's row in the
   * registry fresh (so it runs when no job does). One at a time: stop() waits for the one in
   * flight before removing the row, so a late heartbeat cannot put it back.
   */
  heartbeat(): Promise<void> {
    if (!this.beat) this.beat = this.beatOnce().finally(() => (this.beat = null));
    return this.beat;
  }

  private async beatOnce(): Promise<void> {
    const byId = new Map<string, QueueWorker>();
    for (const w of this.workers.values()) for (const id of w.runningIds()) byId.set(id, w);
    const ids = [...byId.keys(), ...this.completer.pendingIds()];
    try {
      const { kept, cancel } = await this.store.heartbeat(ids, this.workerId, this.opts.leaseMs, this.nodeRow);
      for (const [id, w] of byId) if (!kept.has(id)) w.leaseLost(id, new LeaseLostError(id));
      // The cancels whose NOTIFY this node missed (the listener was down, or poll-only mode).
      for (const id of cancel) byId.get(id)?.cancel(id);
    } catch (err) {
      this.emit('error', err as Error);
    }
  }

  /**
   * One maintenance pass (if this node wins the election): rescue expired leases, prune history,
   * vacuum the jobs table when it needs it.
   */
  async maintain(): Promise<void> {
    try {
      const r = await this.store.maintain(1000);
      // Not awaited (see HistoryUpkeep), but tracked: shutdown waits for it like any pass. Not
      // started once stop() began: it waits only for the passes running then, then ends the pool.
      if (r && !this.stopped) void this.track(this.history.runOnce((err) => this.emit('error', err)).then(() => undefined));
      if (r) await this.vacuum.runOnce();
      // Every node that runs schedules, not only the elected one: ticks are deduplicated in the database.
      await this.cron?.catchUp();
      if (r && r.stalled.length) {
        for (const j of r.stalled) {
          if (this.opts.logJobFailures !== 'none') {
            this.logger.error(
              `Job ${j.id} (${j.queue}/${j.name}) attempt ${j.attempt}: lease expired (its worker died, was killed, or stalled ` +
                `longer than leaseMs); ${j.willRetry ? 'back in the queue' : 'failed: no attempts left'}`,
            );
          }
          this.emit('stalled', j);
        }
      }
    } catch (err) {
      this.emit('error', err as Error);
    }
  }

  /** An outcome was written: its event fires, a failure is logged, a job due again wakes its worker. */
  private outcomeWritten(o: PendingOutcome): void {
    const { job } = o;
    switch (o.kind) {
      case 'completed':
        this.emit('completed', job, o.result);
        return;
      case 'retry':
        if (this.opts.logJobFailures === 'all') {
          this.logger.warn(
            `Job ${job.id} (${job.queue}/${job.name}) attempt ${o.attempt}/${job.maxAttempts} failed: ${shown(o.error.message)}; ` +
              `retrying in ${o.delayMs} ms`,
          );
        }
        this.emit('retrying', job, o.error, o.delayMs);
        this.workers.get(job.queue)?.wake(o.delayMs);
        return;
      case 'snoozed':
        this.emit('snoozed', job, o.delayMs);
        this.workers.get(job.queue)?.wake(o.delayMs);
        return;
      case 'cancelled':
        this.emit('cancelled', job, o.error);
        return;
      default:
        if (this.opts.logJobFailures !== 'none') {
          const moved = o.kind === 'dead-letter' ? `; moved to dead-letter queue "${o.deadLetterQueue}"` : '';
          this.logger.error(
            `Job ${job.id} (${job.queue}/${job.name}) failed on its last attempt (${o.attempt}/${job.maxAttempts}): ${shown(o.error.message)}${moved}`,
            o.error.stack,
          );
        }
        this.emit('failed', job, o.error);
    }
  }

  /** An outcome matched no row (lease lost): nothing changed, so no transition event; said and counted. */
  private outcomeDropped(o: PendingOutcome): void {
    const { job } = o;
    this.logger.warn(
      `Outcome of job ${job.id} (${job.queue}/${job.name}) attempt ${o.attempt} (${o.kind}) not written: the job is no longer ` +
        `this worker's (its lease expired, so the rescuer or another worker has it); dropped`,
    );
    this.emit('outcomeDropped', job, o.kind);
  }

  /** The database refused an outcome even alone: the job was failed in its place (or left to its lease). */
  private outcomeRefused(o: PendingOutcome, err: Error, failedInstead: PendingOutcome | null): void {
    const { job } = o;
    this.logger.error(
      `The database refused the ${o.kind} outcome of job ${job.id} (${job.queue}/${job.name}) attempt ${o.attempt} (${err.message}); ` +
        (failedInstead ? 'the job was failed with an OutcomeRefusedError instead' : 'it runs again once its lease expires'),
    );
    if (failedInstead?.kind === 'failed') this.emit('failed', job, failedInstead.error);
  }

  /**
   * Graceful stop: claim nothing more, let running jobs finish for up to shutdownTimeoutMs, write
   * their outcomes, then hand whatever still runs back to the queue so another worker takes it
   * at once (its interrupted attempt is not counted).
   */
  async stop(): Promise<void> {
    if (!this.started || this.stopped) return;
    this.stopped = true;
    this.cron?.stop();
    const deadline = Date.now() + this.opts.shutdownTimeoutMs;
    // A claim stuck on an unreachable database must not hold shutdown past its deadline.
    let claimTimer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...this.workers.values()].map((w) => w.stopClaiming())),
      new Promise((r) => (claimTimer = setTimeout(r, this.opts.shutdownTimeoutMs))),
    ]);
    clearTimeout(claimTimer);
    // Prefetched jobs that never started go back first, so other workers can take them now.
    const unstarted = [...this.workers.values()].flatMap((w) => w.takeBuffer());
    if (unstarted.length) {
      await this.store.handBack(unstarted, this.workerId).catch((err: Error) => {
        this.logger.warn(
          `Handing back ${unstarted.length} prefetched job(s) failed (${err.message}); the rescuer will after their lease`,
        );
      });
    }
    const all = Promise.all([...this.workers.values()].map((w) => w.idle()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now()))))]);
    clearTimeout(timer);
    const abandoned = [...this.workers.values()].flatMap((w) => w.abandon(new ShutdownError()));
    // Outcomes get at least a couple of seconds even when the grace period is spent: losing
    // them means running those jobs again.
    const left = await this.completer.drain(Math.max(deadline, Date.now() + 2000));
    if (left) this.logger.warn(`${left} job outcome(s) could not be written; those jobs will run again after their lease`);
    if (abandoned.length) {
      try {
        const n = await this.store.handBack(abandoned, this.workerId);
        this.logger.warn(`Handed ${n} unfinished job(s) back to the queue at shutdown`);
      } catch (err) {
        this.logger.warn(
          `Handing back ${abandoned.length} job(s) failed (${(err as Error).message}); the rescuer will after their lease`,
        );
      }
    }
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.maintenanceTimer) clearInterval(this.maintenanceTimer);
    if (this.workers.size > 0) {
      // Best effort, and bounded: a database that does not answer (a blackholed network, a pooler
      // waiting for a server) must not hold shutdown; the maintenance pass prunes a stale row.
      const removed = (async () => {
        await this.beat;
        await this.store.removeNode(this.workerId);
      })();
      removed.catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), NODE_REMOVAL_WAIT_MS)));
      try {
        if ((await Promise.race([removed, gaveUp])) === 'timeout') {
          this.logger.warn(
            `Removing this node from the registry took over ${NODE_REMOVAL_WAIT_MS} ms; maintenance drops it after 10 heartbeats`,
          );
        }
      } catch (err) {
        this.logger.warn(
          `Removing this node from the registry failed (${(err as Error).message}); maintenance drops it after 10 heartbeats`,
        );
      } finally {
        clearTimeout(timer);
      }
    }
    await this.listener?.stop();
    // A pass the timers started may still run (a vacuum check after the rescue, say): the pool
    // closes after stop() returns, and a pass that outlived it logged "Cannot use a pool after
    // calling end on the pool" (seen in the scale benchmark's shutdowns).
    // Bounded too: a pass stuck on a database that does not answer must not hold shutdown.
    let passTimer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...this.passes]), new Promise((r) => (passTimer = setTimeout(r, PASS_WAIT_MS)))]).finally(
      () => clearTimeout(passTimer),
    );
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

/** An error message as a log line shows it: one line, at most 1,000 characters. */
function shown(message: string): string {
  const line = message.replace(/\s*\n\s*/g, ' ');
  return line.length > 1000 ? `${line.slice(0, 1000)}...` : line;
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
