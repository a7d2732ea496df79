import { EventStore } from './events';
import type { ListKey, ListState } from '../core/dashboard-reads';
import type { GroupCountsOrder, QueueGroupCounts } from '../core/group-counts';
import type { Job, JobState, QueueCounts } from '../core/job';
import type { PgPool } from '../core/pg-types';
import { Claims, type ClaimedRow } from './claim';
import { LimitedClaims } from './claim-limited';
import { BulkChanges } from './bulk';
import { Changes } from './change';
import { Cleaner } from './clean';
import { Control } from './control';
import { QueueLimits } from './queue-limits';
import { GroupedClaims } from './claim-grouped';
import { JobSchedulers } from './job-schedulers';
import { DedupInserts } from './dedup';
import type { QueueRetentions } from './queue-retention';
import type { SqlExecutor } from './executor';
import { FlowInserts, type ExistingDependency, type FlowInserted, type FlowNodeRow } from './flow-insert';
import { Finder, type FoundPage } from './find';
import { FlowStore } from './flows';
import { HistoryLayoutCache } from './history/by-id';
import { JobLogs } from './job-logs';
import { CoalescedInserts } from './insert-coalesced';
import { Inserts, type Inserted } from './insert';
import { UniqueInserts } from './insert-unique';
import type { StalledJob } from '../core/events';
import { Maintenance } from './maintenance';
import type { NewJobRow } from './new-job';
import { OutcomeWriters, type Outcome } from './outcomes';
import { Reads } from './reads';
import { RunningJobs, type NodeRow } from './running';
import { settle, type SettleResult } from './settle';
import { JobSteps } from './steps';
import { StoreContext, type StoreOptions } from './store-context';
import { Vacuum, type JobsTableSize } from './vacuum';

// The types of the facade's signatures, where its callers (worker, producer, module) take them.
export type { ClaimedRow } from './claim';
export type { GroupClaimSettings } from './claim-grouped';
export type { ExistingDependency, FlowInserted, FlowNodeRow } from './flow-insert';
export type { FoundPage } from './find';
export type { Inserted } from './insert';
export type { StalledJob } from '../core/events';
export type { NewJobRow } from './new-job';
export type { Outcome } from './outcomes';
export type { NodeRow } from './running';
export type { SettleResult } from './settle';
export type { JobsTableSize } from './vacuum';
export type { LogAppend, LogCaps, LogPage } from './job-logs';
export type { RecordedSteps, StepRow } from './steps';

/**
 * Every read and write of job rows, on the queue's pool or on a caller's transaction: the one
 * door to lib/db for the worker, the producer and the module. Each method hands over to the file
 * of its stage, where its statement is written next to the code that binds its parameters:
 * insert.ts, insert-unique.ts, insert-coalesced.ts, flow-insert.ts (enqueue); claim.ts,
 * claim-limited.ts (claim); running.ts (heartbeat, progress, hand-back); outcomes.ts and
 * settle.ts (an attempt's end); control.ts (cancel, pause, retry, remove); change.ts (promote,
 * priority, delay, payload of a waiting job); find.ts (getJobs, getJobCounts, getJobByKey); clean.ts
 * (clean, drain, obliterate); bulk.ts, bulk-live.ts, bulk-history.ts (retryJobs, removeJobs,
 * cancelJobs); job-schedulers.ts; maintenance.ts (rescue, retention) and vacuum.ts; reads.ts and
 * flows.ts (getJob, counts, children); history/ (partitions, reads by id).
 */
export class JobStore {
  readonly channel: string;
  readonly schema: string;
  /** Flows and dependencies (migration 0008): a parent's children, a job's place in a flow. */
  readonly flows: FlowStore;
  /** The operator's bulk removals (clean.ts): clean, drain, obliterate, a batch per statement. */
  readonly cleaner: Cleaner;
  /** Deduplication with a window (dedup.ts, migration 0013): the adds that carry it, and the keys. */
  readonly dedup: DedupInserts;
  /** The cross-process events' confirming read (events.ts). */
  readonly events: EventStore;
  /** The module's retention and the queues' own (queue-retention.ts): set at boot, read by maintenance. */
  readonly retentions: QueueRetentions;
  /** Job logs (job-logs.ts): the worker's batched appends, getJobLogs' pages. */
  readonly logs: JobLogs;
  /** The operator's changes of many jobs (bulk.ts): retryJobs, removeJobs, cancelJobs, by filter in batches or by ids. */
  readonly bulk: BulkChanges;
  /** A queue's global concurrency stored in the database (queue-limits.ts, migration 0015). */
  readonly limits: QueueLimits;
  /** Durable steps (steps.ts, migration 0018): job.step(), sleep(), waitFor(), queue.signal(). */
  readonly steps: JobSteps;
  /** Grouped queues' claim and per-group stored concurrency (claim-grouped.ts, migration 0017). */
  readonly groups: GroupedClaims;
  /** Job schedulers (job-schedulers.ts, migration 0014): upserts, reads, and the tick's claim and write. */
  readonly schedulers: JobSchedulers;
  private readonly ctx: StoreContext;
  private readonly inserts: Inserts;
  private readonly unique: UniqueInserts;
  private readonly singles: CoalescedInserts;
  private readonly flowInserts: FlowInserts;
  private readonly claims: Claims;
  private readonly limited: LimitedClaims;
  private readonly outcomes: OutcomeWriters;
  private readonly running: RunningJobs;
  private readonly control: Control;
  private readonly changes: Changes;
  private readonly finder: Finder;
  private readonly maintenance: Maintenance;
  private readonly vacuum: Vacuum;
  private readonly reads: Reads;

  constructor(
    readonly pool: PgPool,
    opts: StoreOptions,
  ) {
    const ctx = (this.ctx = new StoreContext(pool, opts.schema, opts));
    this.schema = opts.schema;
    this.channel = ctx.channel;
    this.flows = new FlowStore(opts.schema, ctx.db);
    this.inserts = new Inserts(ctx);
    this.unique = new UniqueInserts(ctx);
    this.singles = new CoalescedInserts(this.inserts, Math.max(1, opts.poolSize ?? 10));
    this.flowInserts = new FlowInserts(ctx);
    this.claims = new Claims(ctx);
    this.limited = new LimitedClaims(ctx, this.claims.q.claim);
    this.outcomes = new OutcomeWriters(ctx);
    this.running = new RunningJobs(ctx);
    this.control = new Control(ctx);
    this.changes = new Changes(ctx);
    this.finder = new Finder(ctx);
    this.bulk = new BulkChanges(ctx, this.control);
    this.cleaner = new Cleaner(ctx, this.bulk.walks);
    this.limits = new QueueLimits(ctx);
    this.groups = new GroupedClaims(ctx);
    this.dedup = new DedupInserts(ctx);
    this.steps = new JobSteps(ctx);
    this.events = new EventStore(ctx.db, ctx.sql, ctx.eventsChannel);
    this.retentions = ctx.retentions;
    this.schedulers = new JobSchedulers(ctx);
    this.maintenance = new Maintenance(ctx);
    this.vacuum = new Vacuum(ctx);
    const layout = new HistoryLayoutCache(ctx.db, opts.schema);
    this.reads = new Reads(ctx, layout, this.flows);
    this.logs = new JobLogs(ctx, layout);
  }

  // Enqueue (insert.ts, insert-unique.ts, insert-coalesced.ts, flow-insert.ts)

  /** Inserts jobs in one statement; returns what the database assigned, in input order. */
  insert(rows: readonly NewJobRow[], db?: SqlExecutor): Promise<Inserted> {
    return this.inserts.insert(rows, db);
  }

  /** Inserts jobs with unique keys (and any others of the same call) in one statement (insert-unique.ts). */
  insertUnique<T>(rows: readonly NewJobRow[], db?: SqlExecutor): Promise<{ jobs: Job<T>[]; inserted: NewJobRow[] }> {
    return this.unique.insertUnique<T>(rows, db);
  }

  /** One job without a unique key on the queue's own pool, coalesced with others under load (insert-coalesced.ts). */
  insertCoalesced(row: NewJobRow): Promise<{ id: string; now: Date }> {
    return this.singles.add(row);
  }

  /** Inserts a flow (or a job with dependencies), in the caller's transaction when `db` is one (flow-insert.ts). */
  insertFlow(
    nodes: readonly FlowNodeRow[],
    existing: readonly ExistingDependency[],
    db: SqlExecutor | undefined,
  ): Promise<FlowInserted> {
    return this.flowInserts.insertFlow(nodes, existing, db);
  }

  // Claim (claim.ts, claim-limited.ts)

  claim(queue: string, limit: number, workerId: string, leaseMs: number): Promise<ClaimedRow[]> {
    return this.claims.claim(queue, limit, workerId, leaseMs);
  }

  /** The claim within a window of priority and due time, or (`outside`) of every other due job. */
  claimSince(
    queue: string,
    limit: number,
    workerId: string,
    leaseMs: number,
    fromPriority: number,
    windowMs: number,
    side: 'inside' | 'outside' = 'inside',
  ): Promise<ClaimedRow[]> {
    return this.claims.claimSince(queue, limit, workerId, leaseMs, fromPriority, windowMs, side);
  }

  /** The claim of a queue with globalConcurrency or a limiter, serialised across nodes. */
  claimLimited(
    queue: string,
    free: number,
    workerId: string,
    leaseMs: number,
    limits: { globalConcurrency: number | null; limiter: { max: number; durationMs: number } | null },
  ): Promise<{ rows: ClaimedRow[]; retryInMs: number | null }> {
    return this.limited.claimLimited(queue, free, workerId, leaseMs, limits);
  }

  /** Milliseconds until the queue's next delayed job is due (database clock); null when none is. */
  nextDueInMs(queue: string): Promise<number | null> {
    return this.claims.nextDueInMs(queue);
  }

  // While jobs run (running.ts)

  /** Renews leases and refreshes this node's row in the registry, in one statement. */
  heartbeat(
    ids: readonly string[],
    workerId: string,
    leaseMs: number,
    node: NodeRow,
  ): Promise<{ kept: Set<string>; cancel: string[] }> {
    return this.running.heartbeat(ids, workerId, leaseMs, node);
  }

  /** Stores a running attempt's progress; false when no row matched (the lease is no longer this worker's). */
  setProgressIfRunning(id: string, attempt: number, workerId: string, progressJson: string): Promise<boolean> {
    return this.running.setProgressIfRunning(id, attempt, workerId, progressJson);
  }

  /** Hands unfinished jobs back at shutdown, the interrupted attempt not counted. */
  handBack(ids: readonly string[], workerId: string): Promise<number> {
    return this.running.handBack(ids, workerId);
  }

  /** Removes this node from the registry (clean shutdown). */
  removeNode(workerId: string): Promise<void> {
    return this.running.removeNode(workerId);
  }

  /** The worker processes (nodes) that heartbeat into this schema now: seen within 3 of their intervals. */
  liveNodeIds(): Promise<string[]> {
    return this.running.liveNodeIds();
  }

  // An attempt's end (outcomes.ts, settle.ts)

  /** Writes a batch of outcomes, one statement per kind present (settle.ts). */
  settle<O extends Outcome>(outcomes: readonly O[], workerId: string): Promise<SettleResult<O>> {
    return settle(this.outcomes, outcomes, workerId);
  }

  /** Completes one attempt in the caller's transaction; false when the lease is no longer this worker's. */
  completeInTransaction(
    db: SqlExecutor,
    id: string,
    workerId: string,
    attempt: number,
    resultJson: string | null,
  ): Promise<boolean> {
    return this.outcomes.completeInTransaction(db, id, workerId, attempt, resultJson);
  }

  // The operator's writes (control.ts)

  /** Cancels a live job: 'cancelled' (it was waiting), 'cancelling' (it runs), or null (no live job). */
  cancel(queue: string, id: string, db?: SqlExecutor): Promise<'cancelled' | 'cancelling' | null> {
    return this.control.cancel(queue, id, db);
  }

  /** Finished jobs back to waiting (ids; or null: every failed job, in batches). Returns how many. */
  retryFinished(queue: string, ids: string[] | null, db?: SqlExecutor): Promise<number> {
    if (ids === null) return this.bulk.retryFinished(queue, { state: 'failed', name: null, finishedBefore: null });
    return this.control.retryFinished(queue, ids, db);
  }

  /** Deletes a waiting or finished job; false when there was none (or it is running). */
  remove(queue: string, id: string, db?: SqlExecutor): Promise<boolean> {
    return this.control.remove(queue, id, db);
  }

  setPaused(queue: string, paused: boolean): Promise<void> {
    return this.control.setPaused(queue, paused);
  }

  isPaused(queue: string): Promise<boolean> {
    return this.control.isPaused(queue);
  }

  /** The ids among `ids` whose cancellation was asked in the database (a notification's confirmation). */
  cancelRequested(ids: readonly string[]): Promise<string[]> {
    return this.control.cancelRequested(ids);
  }

  // Changes to a waiting job (change.ts)

  /** A delayed job of `queue` due now (workers woken); false when it is not delayed-waiting. */
  promote(queue: string, id: string, db?: SqlExecutor): Promise<boolean> {
    return this.changes.promote(queue, id, db);
  }

  /** Every delayed job of `queue` (of one name) due now, in batches; returns how many. */
  promoteMany(queue: string, name: string | null, batch?: number): Promise<number> {
    return this.changes.promoteMany(queue, name, batch);
  }

  /** A waiting job's priority; false when no waiting job of `queue` has that id. */
  changePriority(queue: string, id: string, priority: number, db?: SqlExecutor): Promise<boolean> {
    return this.changes.changePriority(queue, id, priority, db);
  }

  /** A waiting job due `delayMs` from now; false when no waiting job of `queue` has that id. */
  changeDelay(queue: string, id: string, delayMs: number, db?: SqlExecutor): Promise<boolean> {
    return this.changes.changeDelay(queue, id, delayMs, db);
  }

  /** A waiting job's payload replaced; false when no waiting job of `queue` has that id. */
  updatePayload(queue: string, id: string, payloadJson: string, db?: SqlExecutor): Promise<boolean> {
    return this.changes.updatePayload(queue, id, payloadJson, db);
  }

  // The operator's reads (find.ts)

  /** A page of a queue's jobs over states, by keyset. */
  findJobs(
    queue: string,
    states: readonly ListState[],
    name: string | undefined,
    limit: number,
    from: { state: ListState; key: ListKey | null } | null,
    db?: SqlExecutor,
  ): Promise<FoundPage> {
    return this.finder.page(queue, states, name, limit, from, db);
  }

  /** Counts of one queue per state (history states only when asked, else null). */
  jobCounts(
    queue: string,
    history: { completed: boolean; failed: boolean; cancelled: boolean },
    db?: SqlExecutor,
  ): Promise<Record<JobState, number | null>> {
    return this.finder.counts(queue, history, db);
  }

  /** The live job of `queue` holding a unique key, or null. */
  getJobByKey<T>(queue: string, key: string, db?: SqlExecutor): Promise<Job<T> | null> {
    return this.finder.byKey<T>(queue, key, db);
  }

  // Upkeep (maintenance.ts, vacuum.ts)

  /** One maintenance pass, on one node at a time; null when another node has it. */
  maintain(batch: number): Promise<{ stalled: StalledJob[]; pruned: number } | null> {
    return this.maintenance.maintain(batch);
  }

  /** Dead and live row versions of the jobs table, and its size in pages. */
  jobsTableTuples(): Promise<JobsTableSize> {
    return this.vacuum.jobsTableTuples();
  }

  /** VACUUM of the jobs table, on a pool connection (never inside a transaction). */
  vacuumJobs(): Promise<void> {
    return this.vacuum.vacuumJobs();
  }

  /** ANALYZE of the jobs table: new statistics, and every cached plan on it made again. */
  analyzeJobs(): Promise<void> {
    return this.vacuum.analyzeJobs();
  }

  // Reads (reads.ts)

  /** Figures per queue (all queues, or one). */
  counts(queue: string | null): Promise<Map<string, QueueCounts>> {
    return this.reads.counts(queue);
  }

  /** A queue's groups: the first `top` in `orderBy`'s order, the rest summed (group-counts.ts). */
  groupCounts(queue: string, top: number, orderBy: GroupCountsOrder): Promise<QueueGroupCounts> {
    return this.reads.groupCounts(queue, top, orderBy);
  }

  /** One job, live or finished, with its place in a flow; null when there is none. */
  getJob<T>(id: string, db?: SqlExecutor): Promise<Job<T> | null> {
    return this.reads.getJob<T>(id, db);
  }

  /** Tests only: makes the waiting jobs of `queue` (null: all) that are due later due now; returns how many. */
  makeDueWaiting(queue: string | null): Promise<number> {
    return this.reads.makeDueWaiting(queue);
  }
}
