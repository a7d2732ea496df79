import type { DurableSteps } from './steps';
import type { TransactionClient, TransactionManager } from './transaction-types';

export type { TransactionClient, TransactionManager } from './transaction-types';
export { EMPTY_COUNTS, type QueueCounts } from './queue-counts';

/**
 * Where a job is in its life. `delayed` is a waiting job whose `runAt` is still in the future.
 * `waiting`, `delayed` and `active` jobs live in the jobs table; `completed` and `failed` ones have
 * moved to the history table, so they never slow the claim. `waiting-children` is a job of a flow
 * (or with `dependsOn`) whose dependencies have not all finished: live, never claimed until they have.
 */
export type JobState = 'waiting' | 'delayed' | 'active' | 'waiting-children' | 'completed' | 'failed' | 'cancelled';

/** The error of one failed attempt, as stored with the job. */
export interface JobAttemptError {
  /** The attempt (1-based) that failed. */
  readonly attempt: number;
  /** `error.name` of what the handler threw, or `'NonError'` when it threw something else. */
  readonly name: string;
  /** `error.message` of what the handler threw (or the thrown value as text). */
  readonly message: string;
  /** The error's stack, when it had one. */
  readonly stack?: string;
  /** ISO timestamp of the failure. */
  readonly at: string;
  /** The worker (node id, as in the nodes registry) that ran the attempt, where one did. */
  readonly worker?: string;
}

/**
 * How long to wait before the next attempt after a failure.
 * @example { type: 'exponential', delayMs: 1000, maxDelayMs: 60_000, jitter: true }
 */
export interface BackoffOptions {
  /** `fixed`: always `delayMs`. `exponential`: `delayMs * 2^(attempt - 1)`. */
  readonly type: 'fixed' | 'exponential';
  /** Base delay. @default 1000 */
  readonly delayMs?: number;
  /** Upper bound of the computed delay. @default 3_600_000 (1 hour) */
  readonly maxDelayMs?: number;
  /**
   * Spread the delay uniformly over [delay / 2, delay], so failures do not retry in lockstep.
   * Left out, it is taken from the defaults below this one (queue, then module) when they have the
   * same `type`; otherwise it is `true` for `exponential` and `false` for `fixed`, which then waits
   * exactly `delayMs`. `delayMs` and `maxDelayMs` left out always come from the defaults below.
   * @default true (exponential), false (fixed)
   */
  readonly jitter?: boolean;
}

/** Options of one job; defaults come from the queue's, then the module's `defaultJobOptions`. */
export interface JobOptions {
  /** Run no sooner than this many milliseconds after the enqueue commits (database clock). @default 0 (due at once) */
  readonly delayMs?: number;
  /** Run no sooner than this instant. Mutually exclusive with `delayMs`. @default undefined (due at once) */
  readonly runAt?: Date;
  /** Lower runs first, like `@nestjs/bullmq` and graphile-worker; any integer. @default 0 */
  readonly priority?: number;
  /** Maximum number of attempts, the first included. @default 3 */
  readonly attempts?: number;
  /** Delay between attempts. @default { type: 'exponential', delayMs: 1000, maxDelayMs: 3_600_000, jitter: true } */
  readonly backoff?: BackoffOptions;
  /**
   * Abort the attempt after this long: the handler's `job.signal` fires and the attempt fails.
   * @default undefined (no timeout)
   */
  readonly timeoutMs?: number;
  /**
   * At most one live (waiting or running) job of this queue carries this key. Adding another
   * while one is live inserts nothing and returns the live job; once it has finished, the key is
   * free. Per job only: not allowed in `defaultJobOptions`.
   * @default undefined (no key: every add inserts a job)
   */
  readonly uniqueKey?: string;
  /**
   * With `uniqueKey`: when the live job is still waiting, replace its payload, run time,
   * priority and attempts by this add's (debounce: the last add wins, and runs after its own
   * delay). A running job is left alone and returned. @default false
   */
  readonly replaceWaiting?: boolean;
  /**
   * Deduplication with a window (BullMQ's throttle mode): the first add with `key` inserts a job
   * and holds the key for `ttlMs`; every add with that key until then inserts nothing and returns
   * that first job, even after it finished. Not with `uniqueKey` (which holds a key while its job
   * is live), nor `dependsOn`; per job only (not a default, not in a flow).
   * @default undefined (no deduplication)
   */
  readonly deduplication?: DeduplicationOptions;
  /**
   * The job's group (a tenant, a customer, a key): in a queue registered with `group`, groups
   * take fair turns and each has its own concurrency and rate limits (docs/groups.md). Any string
   * of 1 to 200 characters. Per job (add, addBulk, flows); in other queues it is only stored.
   * @default undefined (no group)
   */
  readonly group?: string;
}

/** `JobOptions.deduplication`: a key held for a window from the first add (BullMQ's throttle mode). */
export interface DeduplicationOptions {
  /** The key, per queue (BullMQ's `id`): a string of 1 to 1000 characters. */
  readonly key: string;
  /** How long the key is held from the first add, in milliseconds (BullMQ's `ttl`): 1 to 100 years. */
  readonly ttlMs: number;
}

/**
 * The job options a queue or the module may default: all but the per-job ones (a key, and when
 * to run). Each one given replaces the one below it (job over queue over module over built-in);
 * a `backoff` takes the fields it leaves out from the backoff below it.
 */
export type JobDefaults = Omit<JobOptions, 'uniqueKey' | 'replaceWaiting' | 'deduplication' | 'delayMs' | 'runAt' | 'group'>;

/**
 * A queue's job defaults (`registerQueue({ defaultJobOptions })`): the module's `JobDefaults`,
 * and `group` as a function of the payload.
 */
export interface QueueJobDefaults<TPayload = unknown> extends JobDefaults {
  /**
   * The group of a job added without one (add, addBulk, flows, and a job scheduler's template at
   * its upsert), from its payload: a string of 1 to 200 characters, or null or undefined for no
   * group. A job's own `group` wins. A function that throws, or returns anything else, fails the
   * enqueue with `PgQueueConfigError` naming the queue and the job. Called once per job, in
   * the caller's process, before the insert: keep it a cheap read of the payload.
   *
   * Written as a method so that a function of the queue's payload type is accepted, `(p:
   * ImportPayload) => p.tenantId`: the options are not generic over the payload, so the
   * parameter's type is the caller's promise (as a handler's `Job<T>` is).
   * @default undefined (a job without its own group has none)
   * @example
   * PgQueueModule.registerQueue({
   *   name: 'imports',
   *   group: { concurrency: 2 },
   *   defaultJobOptions: { group: (p: { tenantId: string }) => `tenant-${p.tenantId}` },
   * });
   */
  group?(payload: TPayload): string | null | undefined;
}

/** Options of one enqueue call. */
export interface EnqueueOptions extends JobOptions {
  /**
   * Join this TypeORM transaction: the insert and its wake-up notification run on it and take
   * effect only when it commits. A rollback leaves no job behind. It must be in a transaction
   * (`dataSource.transaction(async (manager) => ...)`, or `queryRunner.manager` after
   * `startTransaction()`): `dataSource.manager` would autocommit the job, so it is refused with
   * `PgQueueConfigError`.
   * @default undefined (the active `@nestjs-cls/transactional` transaction if any, else the queue's pool)
   */
  readonly manager?: TransactionManager;
  /**
   * Join this node-postgres transaction (for apps without TypeORM). Same guarantee as `manager`.
   * A client before `BEGIN`, or a `Pool`, is refused with `PgQueueConfigError`.
   * @default undefined (as `manager`)
   */
  readonly client?: TransactionClient;
  /**
   * Run only after these existing jobs (of any queue) have finished: the job waits in state
   * `waiting-children` until then. An id that already completed counts as done; one that
   * already failed or was cancelled counts per its `onFailure` (`'fail-parent'`, the default,
   * refuses the add with `DependencyError`; `'ignore'` counts it as done); an unknown id
   * (never enqueued, or pruned) is refused with `DependencyError`. Not with `uniqueKey`.
   * @default [] (due as soon as its delay allows)
   */
  readonly dependsOn?: readonly Dependency[];
}

/** One entry of `addBulk`. */
export interface BulkJob<TName extends string = string, TPayload = unknown> {
  /** The job name, as for `add`: it picks the `@Process` handler. */
  readonly name: TName;
  /** The job's data (JSON), as for `add`. */
  readonly payload: TPayload;
  /** This job's options, over the queue's and the module's defaults. */
  readonly opts?: JobOptions;
}

/** A job as stored. Handlers receive an {@link ActiveJob}, which is a `Job` with a signal. */
export interface Job<TPayload = unknown, TResult = unknown> {
  /** Database id (a bigint, as a string so it never loses precision). */
  readonly id: string;
  /** The queue it was added to. */
  readonly queue: string;
  /** The job name, which picked its `@Process` handler. */
  readonly name: string;
  /** The data given to `add` (as stored: JSON, so a `Date` comes back as a string). */
  readonly payload: TPayload;
  /** Where it is in its life. */
  readonly state: JobState;
  /** Lower runs first (`JobOptions.priority`). */
  readonly priority: number;
  /**
   * Attempts started so far, the running one included: 1 on a handler's first run, 0 for a job
   * that has not run yet. Not BullMQ's count: see {@link Job.attemptsMade}.
   */
  readonly attempt: number;
  /**
   * Attempts that have ended: `attempt - 1` while the job runs (the attempts before this one; 0
   * on a handler's first run), else `attempt`. What `@nestjs/bullmq`'s `job.attemptsMade` counts,
   * for porting code such as `if (job.attemptsMade > 0) log('retry')`.
   */
  readonly attemptsMade: number;
  /** How many attempts it may have in all, the first included (`JobOptions.attempts`). */
  readonly maxAttempts: number;
  /** When it is (or was) due: its next attempt never starts before this (database clock). */
  readonly runAt: Date;
  /** When the add committed (database clock). */
  readonly createdAt: Date;
  /** When its latest attempt started; null before the first. */
  readonly startedAt: Date | null;
  /** When it completed, failed for good or was cancelled; null while live. */
  readonly finishedAt: Date | null;
  /** The errors of earlier attempts, oldest first. */
  readonly errors: readonly JobAttemptError[];
  /** What the handler returned (JSON), once completed. */
  readonly result: TResult | null;
  /** The attempt timeout it was added with (`JobOptions.timeoutMs`); null for none. */
  readonly timeoutMs: number | null;
  /** Its parents and dependencies, when it is part of a flow (`getJob` only). */
  readonly flow?: JobFlow;
  /**
   * The latest value a handler reported with `job.updateProgress()` (as last written: at most
   * `progressIntervalMs` behind while the job runs), or null. Kept across retries and into history.
   */
  readonly progress: JobProgress | null;
  /**
   * The `uniqueKey` it was added with, or null. Kept when the job finishes (getJob, getJobs),
   * though a finished job no longer holds the key: only a live job does (`getJobByKey`).
   * A job moved to a dead-letter queue, or retried from history, comes back without it
   * (another job may hold the key by then).
   */
  readonly uniqueKey: string | null;
  /** The `group` it was added with, or null (docs/groups.md). Kept into history and on retry. */
  readonly group: string | null;
}

/**
 * What `job.updateProgress()` takes: a number (a percentage, a count...) or a small JSON object
 * (at most `maxProgressBytes` of JSON), e.g. `{ done: 40, total: 120 }`.
 */
export type JobProgress = number | { readonly [key: string]: unknown };

/** The job a handler runs, with its durable steps (`step`, `sleep`, `waitFor`: docs/steps.md). */
export interface ActiveJob<TPayload = unknown> extends Job<TPayload>, DurableSteps {
  /**
   * Fires when the attempt should stop: its `timeoutMs` passed, the process is shutting down,
   * or the lease was lost. Pass it to `fetch` and friends.
   */
  readonly signal: AbortSignal;
  /**
   * Completes the job inside your transaction, so your writes and the job's completion commit
   * together or not at all. Throws `LeaseLostError` if this attempt no longer owns the job (its
   * lease expired and another worker may run it): let it propagate so your transaction rolls
   * back instead of writing twice. Call it last; the handler's return value is then ignored. A
   * manager or client not in a transaction is refused with `PgQueueConfigError` (the call does
   * not count: call again with the right one).
   * @example await dataSource.transaction(async (manager) => { await manager.save(invoice); await job.completeWith({ manager }); });
   */
  completeWith(
    target: { readonly manager?: TransactionManager; readonly client?: TransactionClient },
    result?: unknown,
  ): Promise<void>;
  /**
   * The jobs this one waited on (a flow's children, or its `dependsOn`), by id, with how each
   * ended and what it returned, read in one query. Empty for a job without dependencies.
   */
  childResults<TResult = unknown>(): Promise<ChildResult<TResult>[]>;
  /**
   * Reports progress: `job.progress` changes at once, a `progress` event fires on this node, and
   * the value is stored, throttled to at most one write per `progressIntervalMs` for this job (the
   * latest value always lands before the attempt's outcome is written). Resolves once the value is
   * accepted, without waiting for the write, so a tight loop costs no round trips. Rejects with
   * `PgQueuePayloadError` for anything but a finite number or a plain JSON object within
   * `maxProgressBytes`. After the attempt ended (returned, threw, timed out) it changes nothing.
   * @example await job.updateProgress({ done: i, total: rows.length });
   */
  updateProgress(value: JobProgress): Promise<void>;
  /**
   * Adds a line to the job's log, kept with the job across its attempts and into history, and
   * read with `queue.getJobLogs(id)` or on the dashboard's job page. Returns at once, nothing to
   * await (BullMQ's `log()` resolves to the line count after a round trip): the line is buffered
   * and the worker writes the lines of all its jobs in one statement at most once per
   * `progressIntervalMs`, and those of an attempt before its outcome. Lines written before a
   * crash stay; a line logged less than `progressIntervalMs` before one is lost with the process.
   * Capped by the module's `jobLogs` (the first lines are kept, the rest counted). Throws
   * `PgQueuePayloadError` for anything but a string. After the attempt ended it changes nothing.
   * @example job.log(`fetched ${rows.length} rows`);
   */
  log(line: string): void;
}

/** A `@Process` handler. What it returns is stored as the job's result. */
export type JobHandler<TPayload = unknown> = (job: ActiveJob<TPayload>) => unknown;

/**
 * What a child's failure for good (failed on its last attempt, cancelled, or removed) does to
 * its parent. `'fail-parent'`: the parent fails at once without running, with a
 * `ChildFailedError` naming the child (like `@nestjs/bullmq`'s `failParentOnFailure`).
 * `'ignore'`: the child counts as finished; the parent runs once every child has, and sees the
 * failure in `job.childResults()` (like `ignoreDependencyOnFailure`).
 */
export type ChildFailurePolicy = 'fail-parent' | 'ignore';

/** Options of one job of a flow: every job option but the unique key (a flow's jobs are always new). */
export type FlowJobOptions = Omit<JobOptions, 'uniqueKey' | 'replaceWaiting' | 'deduplication'>;

/**
 * One job of a flow, with the jobs that must finish before it runs. Every queue named must be
 * registered (`PgQueueModule.registerQueue`), as for `add`.
 * @example
 * { queue: 'orders', name: 'ship', payload: { orderId }, children: [
 *   { queue: 'stock', name: 'reserve', payload: { sku: 'a' } },
 *   { queue: 'billing', name: 'charge', payload: { orderId }, onFailure: 'fail-parent' },
 * ] }
 */
export interface FlowJob<TPayload = unknown> {
  /** The queue of this job: any registered queue, on any of the module's connections. */
  readonly queue: string;
  /** The job name, as for `add`. */
  readonly name: string;
  /** The job's data (JSON), as for `add`. */
  readonly payload: TPayload;
  /** This job's options (every job option but the unique key). */
  readonly opts?: FlowJobOptions;
  /** What this job's failure does to its parent (ignored on the root). @default 'fail-parent' */
  readonly onFailure?: ChildFailurePolicy;
  /** Jobs that must finish first: this one waits in state `waiting-children` until they have. */
  readonly children?: readonly FlowJob[];
}

/** The jobs a flow created, in the shape of the flow (`@nestjs/bullmq`'s `JobNode`). */
export interface FlowNode<TPayload = unknown> {
  /** The job created for this node of the flow. */
  readonly job: Job<TPayload>;
  /** The nodes of its children, in the order the flow listed them. */
  readonly children: readonly FlowNode[];
}

/**
 * One dependency of `add(..., { dependsOn })`: a job id, or `{ id, onFailure }` with the
 * failure policy of that dependency (`onFailure` defaults to `'fail-parent'`).
 */
export type Dependency = string | { readonly id: string; readonly onFailure?: ChildFailurePolicy };

/** A child of a running parent, as `job.childResults()` reads it. */
export interface ChildResult<TResult = unknown> {
  /** The child's job id. */
  readonly id: string;
  /** null when the child is gone from both tables (pruned after its retention, or removed). */
  readonly queue: string | null;
  /** Its job name; null when the child is gone from both tables. */
  readonly name: string | null;
  /** How it ended (`completed`, `failed`, `cancelled`, or `removed`), or its live state. */
  readonly state: JobState | 'removed';
  /** What its handler returned; null unless completed (and null once pruned from history). */
  readonly result: TResult | null;
  /** Its last attempt's error, if any. */
  readonly error: JobAttemptError | null;
  /** What its failure does to the parent, as the flow (or `dependsOn`) set it. */
  readonly onFailure: ChildFailurePolicy;
}

/** Where a job stands in a flow, as `getJob` reports it (absent for a job in no flow). */
export interface JobFlow {
  /** The jobs that wait on this one (its parent in a tree; several in a DAG). */
  readonly parentIds: readonly string[];
  /** How many jobs this one waits (or waited) on. */
  readonly dependencies: number;
  /** How many of those have not finished yet. */
  readonly pendingDependencies: number;
  /** The first 100 of those, by id. */
  readonly pendingDependencyIds: readonly string[];
}
