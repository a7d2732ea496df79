import { PgQueueConfigError } from './errors';
import { quote } from './input-text';
import { validateConnectionName, validateQueueName, validateSchemaName } from './names';
import type { BackoffOptions, JobDefaults, JobOptions } from './job';
import { resolveSchedule, type RepeatOptions, type ResolvedSchedule } from './cron-schedule';
import type { PgPoolConfig } from './pg-types';

/** Something Nest can resolve from the container: a class, a string or a symbol. */
export type InjectionTokenLike = string | symbol | (abstract new (...args: never[]) => unknown);

/** The subset of a TypeORM `DataSource` this module reads (its connection options). */
export interface DataSourceLike {
  readonly options: { readonly type: string };
}

/** Options of `PgQueueModule.forRoot`. Every field is optional; defaults are listed per field. */
export interface PgQueueModuleOptions {
  /**
   * A TypeORM `DataSource` (or its DI token) whose connection settings the queue reuses for its own
   * small pool. @default the app's default DataSource, when `@nestjs/typeorm` provides one
   */
  dataSource?: DataSourceLike | InjectionTokenLike;
  /** A connection string or `pg` PoolConfig, for apps without TypeORM. Wins over `dataSource`. */
  connection?: string | PgPoolConfig;
  /**
   * A direct (not PgBouncer) connection for LISTEN, when `connection` goes through PgBouncer in
   * transaction mode. @default the same settings as the pool
   */
  listenConnection?: string | PgPoolConfig;
  /** Schema of the queue's tables. Lower-case letters, digits and `_`. @default 'pgqueue' */
  schema?: string;
  /** Apply pending migrations at boot, under an advisory lock. @default true */
  migrate?: boolean;
  /** Run this process's workers. Set false in a producer-only process. @default true */
  workers?: boolean;
  /** LISTEN for wake-ups. Set false (poll-only) behind PgBouncer in transaction mode without `listenConnection`. @default true */
  listen?: boolean;
  /** How often an idle queue polls: the floor when notifications are missed. @default 2000 */
  pollIntervalMs?: number;
  /** How long a claimed job is leased before the rescuer may hand it to another worker. @default 30_000 */
  leaseMs?: number;
  /** How often the leases of running jobs are renewed. @default leaseMs / 3 */
  heartbeatIntervalMs?: number;
  /** How often expired leases are looked for. @default 5000 */
  rescueIntervalMs?: number;
  /** How long `app.close()` waits for running jobs before handing them back. @default 10_000 */
  shutdownTimeoutMs?: number;
  /**
   * The node that runs maintenance vacuums the jobs table once it holds this many dead tuples
   * (or a tenth of its live rows, if more). Every job leaves two or three dead row versions
   * there, and autovacuum visits a database only once a minute by default: at 300 jobs/s that
   * is tens of thousands of dead tuples in a table whose backlog may be a few hundred rows. A
   * vacuum that frees little (a long transaction elsewhere holds the xmin horizon back) is
   * retried with a growing pause, up to a minute. 0 leaves the table to autovacuum alone.
   * Needs the table's owner (the role that ran the migrations).
   * @default 10_000
   */
  vacuumAtDeadTuples?: number;
  /**
   * After a restart (or an outage), ticks of recurring jobs missed within this window are
   * enqueued, each once; older ones are skipped. @default 3_600_000 (one hour)
   */
  cronCatchUpMs?: number;
  /** Maximum connections of the queue's own pool (the listener has one more). @default 4 */
  poolSize?: number;
  /** Largest payload accepted, in bytes of JSON. @default 1_048_576 */
  maxPayloadBytes?: number;
  /**
   * `job.updateProgress()` writes at most once per this many milliseconds per job; calls in
   * between only change `job.progress` and fire the `progress` event, and the latest value is
   * written when the interval ends (and always before the attempt's outcome). A tight loop of
   * 10,000 calls makes 2 writes. @default 500
   */
  progressIntervalMs?: number;
  /** Largest progress value `job.updateProgress()` accepts, in bytes of JSON. @default 4096 */
  maxProgressBytes?: number;
  /**
   * Let claims, job outcomes and heartbeats commit without waiting for the WAL flush
   * (`synchronous_commit = off` for those statements only). Several times the drain rate; the
   * cost is that a PostgreSQL crash (not a clean restart) can forget the last fraction of a
   * second of them, and those jobs run again. Enqueues on the queue's own connection always
   * commit durably (`synchronous_commit = on` for that statement, whatever the server default);
   * an enqueue in your transaction (`{ manager }`, `{ client }`) commits as your transaction does.
   * @default true
   */
  asyncCommit?: boolean;
  /**
   * Prepare the hot statements (claim, complete, heartbeat, insert) once per connection. Set
   * false behind PgBouncer older than 1.21, or with its max_prepared_statements = 0.
   * @default true
   */
  preparedStatements?: boolean;
  /**
   * While this process's workers run, log a promise rejection that nothing handled (say, a
   * handler's forgotten `await`) as an error and keep the process running, instead of Node's
   * default of ending it: handlers run arbitrary code, and one forgotten `await` must not kill
   * every job in the process. Uncaught exceptions are not caught: Node documents resuming after
   * one as unsafe. Set false if the app handles `unhandledRejection` itself.
   * @default true
   */
  handleUnhandledRejections?: boolean;
  /**
   * What this process logs (through Nest's `Logger`, context `PgQueue`) when jobs fail: `'all'`
   * logs a warning for each failed attempt that will be retried (queue, name, id, attempt,
   * message) and an error when a job fails for good or a lease expires (the rescuer found a job
   * whose worker died or stalled); `'final'` only the errors; `'none'` nothing (use the `failed`
   * and `retrying` events or the metrics instead). A job that completes never logs.
   * @default 'all'
   */
  logJobFailures?: JobFailureLogging;
  /**
   * How long finished jobs stay in the history table before the maintenance node deletes them,
   * a thousand at a time. `completedMs: 0` keeps no history of completed jobs at all. Failed
   * jobs are kept until retried or removed unless `failedMs` is set.
   * @default { completedMs: 86_400_000, cancelledMs: 86_400_000 } (one day; failed: for ever)
   */
  retention?: { completedMs?: number; cancelledMs?: number; failedMs?: number };
  /**
   * The span of one partition of the history table of completed and cancelled jobs, in whole
   * hours: retention drops a partition once all of it is past retention, so a job stays in
   * history between its retention and its retention plus one partition (a state whose retention
   * is shorter than this is deleted row by row instead). The maintenance node creates the
   * partitions ahead of time; every node should be given the same value.
   * @default 86_400_000 (one day, from UTC midnight)
   */
  historyPartitionMs?: number;
  /** Job options every queue starts from. */
  defaultJobOptions?: JobDefaults;
  /**
   * More databases for queues, by name: `registerQueue({ name, connection: 'bulk' })` puts a queue
   * on one. Each gets its own pool, LISTEN connection, migrations and maintenance. The `default`
   * entry, if given, replaces the top-level `connection`/`dataSource`/`listenConnection`; the
   * other fields of an entry (schema, poolSize, ...) default to the top-level ones. A queue on
   * another database than the app's data loses atomic enqueue with that data: see the README,
   * "Queues on more than one database". @default {} (every queue on the default connection)
   */
  connections?: Readonly<Record<string, PgQueueConnectionOptions>>;
}

/**
 * One database of `forRoot({ connections })`: where it is (`connection` or `dataSource`, and
 * `listenConnection`), and the settings that may differ per database. Left out, each setting
 * takes the top-level option's value (then its default).
 */
export interface PgQueueConnectionOptions {
  /** A TypeORM `DataSource` (or its DI token) whose connection settings this database's pool reuses. */
  dataSource?: DataSourceLike | InjectionTokenLike;
  /** A connection string or `pg` PoolConfig. Wins over `dataSource`. */
  connection?: string | PgPoolConfig;
  /** A direct connection for LISTEN, when `connection` goes through PgBouncer in transaction mode. */
  listenConnection?: string | PgPoolConfig;
  /** Schema of the queue's tables in this database. */
  schema?: string;
  /** Apply pending migrations to this database at boot. */
  migrate?: boolean;
  /** LISTEN for wake-ups on this database. */
  listen?: boolean;
  /** Maximum connections of this database's pool. */
  poolSize?: number;
  /** Prepare the hot statements on this database's connections. */
  preparedStatements?: boolean;
}

/** Which job failures are logged: see `PgQueueModuleOptions.logJobFailures`. */
export type JobFailureLogging = 'all' | 'final' | 'none';

/** Options of `PgQueueModule.registerQueue`. */
export interface RegisterQueueOptions {
  /** Queue name: letters, digits, `_`, `-`, `.`, `:`; at most 100 characters. */
  name: string;
  /** Jobs of this queue run at once in this process. @default 10 */
  concurrency?: number;
  /** Job options of this queue, over the module's. */
  defaultJobOptions?: JobDefaults;
  /**
   * A job of this queue that fails its last attempt moves to this queue instead, waiting, with
   * its attempts reset and its errors kept, for a `@Processor` of that queue to handle (alert,
   * park, repair and re-add). Without it, failed jobs stay in history as `failed`.
   */
  deadLetterQueue?: string;
  /**
   * At most this many jobs of the queue run at once across every node. Claims of the queue then
   * take a per-queue advisory lock (a few more round trips each) and prefetch nothing; a slot
   * freed on another node is noticed within `pollIntervalMs`. Each node enforces its own value:
   * give every node the same. @default undefined (no global limit)
   */
  globalConcurrency?: number;
  /**
   * At most `max` jobs of the queue start in any `durationMs` window, across every node (a
   * sliding window, kept in the database). Same claim path as `globalConcurrency`.
   * @default undefined (no rate limit)
   */
  limiter?: { max: number; durationMs: number };
  /** Recurring jobs of this queue, each enqueued once per tick across all nodes. */
  repeat?: RepeatOptions[];
  /**
   * The named connection (`forRoot({ connections })`) whose database holds this queue.
   * @default 'default'
   */
  connection?: string;
}

export interface ResolvedBackoff {
  readonly type: 'fixed' | 'exponential';
  readonly delayMs: number;
  readonly maxDelayMs: number;
  readonly jitter: boolean;
}

export interface ResolvedJobDefaults {
  readonly priority: number;
  readonly attempts: number;
  readonly backoff: ResolvedBackoff;
  readonly timeoutMs: number | null;
}

export interface ResolvedPgQueueOptions {
  readonly schema: string;
  readonly migrate: boolean;
  readonly workers: boolean;
  readonly listen: boolean;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly heartbeatIntervalMs: number;
  readonly rescueIntervalMs: number;
  readonly vacuumAtDeadTuples: number;
  readonly cronCatchUpMs: number;
  readonly shutdownTimeoutMs: number;
  readonly poolSize: number;
  readonly maxPayloadBytes: number;
  readonly progressIntervalMs: number;
  readonly maxProgressBytes: number;
  readonly asyncCommit: boolean;
  readonly preparedStatements: boolean;
  readonly handleUnhandledRejections: boolean;
  readonly logJobFailures: JobFailureLogging;
  readonly retention: { readonly completedMs: number; readonly cancelledMs: number; readonly failedMs: number | null };
  readonly historyPartitionMs: number;
  readonly defaultJobOptions: ResolvedJobDefaults;
}

export interface ResolvedQueueOptions {
  readonly name: string;
  readonly concurrency: number;
  readonly defaultJobOptions: ResolvedJobDefaults;
  readonly deadLetterQueue: string | null;
  readonly globalConcurrency: number | null;
  readonly limiter: { readonly max: number; readonly durationMs: number } | null;
  readonly repeat: readonly ResolvedSchedule[];
  /** The named connection whose database holds the queue. */
  readonly connection: string;
}

/** Every default in one place. */
export const DEFAULTS = {
  schema: 'pgqueue',
  migrate: true,
  workers: true,
  listen: true,
  pollIntervalMs: 2000,
  leaseMs: 30_000,
  rescueIntervalMs: 5000,
  vacuumAtDeadTuples: 10_000,
  cronCatchUpMs: 3_600_000,
  shutdownTimeoutMs: 10_000,
  poolSize: 4,
  maxPayloadBytes: 1_048_576,
  progressIntervalMs: 500,
  maxProgressBytes: 4096,
  asyncCommit: true,
  preparedStatements: true,
  handleUnhandledRejections: true,
  logJobFailures: 'all' as JobFailureLogging,
  retention: { completedMs: 86_400_000, cancelledMs: 86_400_000 },
  historyPartitionMs: 86_400_000,
  concurrency: 10,
  job: {
    priority: 0,
    attempts: 3,
    backoff: { type: 'exponential', delayMs: 1000, maxDelayMs: 3_600_000, jitter: true },
    timeoutMs: null,
  } satisfies ResolvedJobDefaults,
} as const;

export { validateConnectionName, validateJobName, validateQueueName, validateSchemaName } from './names';

/** The longest `delayMs`: 100 years, far inside PostgreSQL's timestamp range (a backoff stays within a timer's 2^31-1 ms). */
export const MAX_DELAY_MS = 100 * 365 * 86_400_000;
/** `runAt` must fall in [1970-01-01, 9999-12-31]: later instants come back from pg as Invalid Date. */
const MAX_RUN_AT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** The longest retention: 100 years (stored as a bigint of milliseconds). */
const MAX_RETENTION_MS = MAX_DELAY_MS;

function int(where: string, value: unknown, fallback: number, min: number, max = 2 ** 31 - 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const why =
      typeof value !== 'number'
        ? `it is ${value === null ? 'null' : `a ${typeof value}`}, not a number`
        : !Number.isFinite(value)
          ? 'it is not a finite number'
          : !Number.isInteger(value)
            ? 'it is not a whole number'
            : value < min
              ? `it is below ${min}`
              : `it is above ${max}`;
    throw new PgQueueConfigError(
      `Invalid ${where}: ${quote(value)} (${why}). Use a whole number from ${min} to ${max}, or leave it out ` +
        `for the default (${fallback}).`,
    );
  }
  return value;
}

function bool(where: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new PgQueueConfigError(`Invalid ${where}: ${quote(value)}. Use true or false.`);
  }
  return value;
}

/** What `@nestjs/bullmq` users reach for, and what it is called here. */
const BULLMQ_NAMES: Readonly<Record<string, string>> = {
  delay: 'delayMs (milliseconds)',
  jobId: 'uniqueKey (at most one live job per key)',
  deduplication: 'uniqueKey (with replaceWaiting: true to debounce)',
  debounce: 'uniqueKey with replaceWaiting: true',
  removeOnComplete: 'the module option retention.completedMs (PgQueueModule.forRoot)',
  removeOnFail: 'the module option retention.failedMs (PgQueueModule.forRoot)',
  lifo: 'nothing: jobs run in priority, then runAt order; give a job a lower priority to run it first',
  repeat: 'registerQueue({ name, repeat: [{ name, cron }] }) or @Process({ name, cron })',
  timeout: 'timeoutMs',
  sizeLimit: 'the module option maxPayloadBytes',
  parent: 'queues.addFlow({ queue, name, payload, children }) for a tree, or add(name, payload, { dependsOn: [ids] })',
  failParentOnFailure: "the flow child's onFailure: 'fail-parent' (the default)",
  ignoreDependencyOnFailure: "the flow child's onFailure: 'ignore'",
  removeDependencyOnFailure: "the flow child's onFailure: 'ignore' (the parent then sees the failure in job.childResults())",
  continueParentOnFailure: "the flow child's onFailure: 'ignore'",
  keepLogs: "nothing: there are no job logs; every attempt's error is kept in job.errors",
  stackTraceLimit: "nothing: every attempt's error is kept with its stack",
  timestamp: 'nothing: createdAt is set by the database',
  prevMillis: 'nothing',
  telemetry: 'nothing: install @opentelemetry/api and register an SDK; enqueues and handlers are traced then',
};

/**
 * Throws on keys of `o` that are not in `known`, naming what to use instead: the option of the
 * same name in other casing, or ours for a `@nestjs/bullmq` option. `extra` says more about some keys.
 */
export function refuseUnknownKeys(
  where: string,
  o: object,
  known: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): void {
  let unknown: string[] | undefined;
  for (const k in o) if (Object.prototype.hasOwnProperty.call(o, k) && !known.includes(k)) (unknown ??= []).push(k);
  if (!unknown) return;
  const said = unknown.map((k) => {
    const hint = extra[k] ?? known.find((n) => n.toLowerCase() === k.toLowerCase()) ?? BULLMQ_NAMES[k];
    return hint ? `${quote(k)} (use ${hint})` : quote(k);
  });
  throw new PgQueueConfigError(`Unknown option(s) in ${where}: ${said.join(', ')}. Known options: ${known.join(', ')}.`);
}

const BACKOFF_KEYS = ['type', 'delayMs', 'maxDelayMs', 'jitter'] as const;

function oneOf<T extends string>(where: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) {
    throw new PgQueueConfigError(
      `Invalid ${where}: ${JSON.stringify(value) ?? String(value)}. Use one of ${allowed.map((a) => `'${a}'`).join(', ')}, ` +
        `or leave it out for the default ('${fallback}').`,
    );
  }
  return value as T;
}

function resolveBackoff(where: string, b: BackoffOptions | undefined, base: ResolvedBackoff): ResolvedBackoff {
  if (b === undefined) return base;
  if (typeof b === 'number') {
    throw new PgQueueConfigError(
      `Invalid ${where}.backoff: ${quote(b)}. A backoff is an object: { type: 'fixed', delayMs: ${quote(b)} }.`,
    );
  }
  if (typeof b !== 'object' || b === null || (b.type !== 'fixed' && b.type !== 'exponential')) {
    throw new PgQueueConfigError(
      `Invalid ${where}.backoff: ${quote(b)}. Use { type: 'fixed' | 'exponential', delayMs?, maxDelayMs?, jitter? }.`,
    );
  }
  refuseUnknownKeys(`${where}.backoff`, b, BACKOFF_KEYS, { delay: 'delayMs (milliseconds)' });
  return {
    type: b.type,
    delayMs: int(`${where}.backoff.delayMs`, b.delayMs, base.delayMs, 0),
    maxDelayMs: int(`${where}.backoff.maxDelayMs`, b.maxDelayMs, base.maxDelayMs, 0),
    // A fixed backoff means "wait delayMs": it gets no jitter unless it asks for it, even over
    // the default exponential one (500 ms fixed waited 283 and 441 ms). Left out, jitter comes
    // from the layer below only when that layer has the same type.
    jitter: bool(`${where}.backoff.jitter`, b.jitter, b.type === base.type ? base.jitter : b.type === 'exponential'),
  };
}

/** Where job options come from: each accepts its own keys. */
export type JobOptionsSource = 'add' | 'bulk' | 'flow' | 'defaults';

const DEFAULT_KEYS = ['priority', 'attempts', 'backoff', 'timeoutMs'] as const;
const BULK_KEYS = [...DEFAULT_KEYS, 'delayMs', 'runAt', 'uniqueKey', 'replaceWaiting'] as const;
const ADD_KEYS = [...BULK_KEYS, 'manager', 'client', 'dependsOn'] as const;
const FLOW_KEYS = [...DEFAULT_KEYS, 'delayMs', 'runAt'] as const;
const KEYS_OF: Readonly<Record<JobOptionsSource, readonly string[]>> = {
  add: ADD_KEYS,
  bulk: BULK_KEYS,
  flow: FLOW_KEYS,
  defaults: DEFAULT_KEYS,
};
const NOT_HERE: Readonly<Record<JobOptionsSource, Readonly<Record<string, string>>>> = {
  add: {},
  bulk: {
    manager: "addBulk's second argument: addBulk(jobs, { manager }), so every job joins that transaction",
    client: "addBulk's second argument: addBulk(jobs, { client }), so every job joins that transaction",
  },
  flow: {
    manager: "addFlow's second argument: addFlow(flow, { manager }), so every job of the flow joins that transaction",
    client: "addFlow's second argument: addFlow(flow, { client }), so every job of the flow joins that transaction",
    uniqueKey: 'nothing: the jobs of a flow are always new, so a flow takes no unique keys',
    replaceWaiting: 'nothing: the jobs of a flow are always new, so a flow takes no unique keys',
    dependsOn: "the flow's children: a node's children run before it",
  },
  defaults: {
    uniqueKey: 'it per job, in add(); it is not a default',
    replaceWaiting: 'it per job, in add(); it is not a default',
    delayMs: 'it per job, in add(); a delay is not a default',
    runAt: 'it per job, in add(); an instant is not a default',
  },
};

/**
 * Layers `opts` over `base`, validating each field; `where` names the option in errors. Each
 * field given replaces the base's; a `backoff` given takes the fields it leaves out from the
 * base's backoff. Keys `source` does not accept are refused, saying what to use instead.
 */
export function resolveJobDefaults(
  where: string,
  opts: JobOptions | undefined,
  base: ResolvedJobDefaults,
  source: JobOptionsSource = 'defaults',
): ResolvedJobDefaults {
  if (opts === undefined) return base;
  if (typeof opts !== 'object' || opts === null) {
    throw new PgQueueConfigError(`Invalid ${where}: ${quote(opts)}; expected an object of job options.`);
  }
  refuseUnknownKeys(where, opts, KEYS_OF[source], NOT_HERE[source]);
  return {
    priority: int(`${where}.priority`, opts.priority, base.priority, -(2 ** 31)),
    attempts: int(`${where}.attempts`, opts.attempts, base.attempts, 1),
    backoff: resolveBackoff(where, opts.backoff, base.backoff),
    timeoutMs: opts.timeoutMs === undefined ? base.timeoutMs : int(`${where}.timeoutMs`, opts.timeoutMs, 0, 1),
  };
}

/**
 * When a job may run: `runAt` (null: now + `delayMs`), checked to be within what PostgreSQL
 * stores and gives back, so an extreme value fails here and not as "timestamp out of range".
 */
export function resolveRunAt(where: string, opts: JobOptions | undefined): { runAt: Date | null; delayMs: number } {
  if (opts === undefined) return { runAt: null, delayMs: 0 };
  const { runAt, delayMs } = opts;
  if (runAt !== undefined && delayMs !== undefined) throw new PgQueueConfigError(`${where}: pass runAt or delayMs, not both.`);
  if (runAt !== undefined) {
    if (!(runAt instanceof Date) || Number.isNaN(runAt.getTime())) {
      throw new PgQueueConfigError(`${where}: runAt must be a valid Date, got ${quote(runAt)}.`);
    }
    const t = runAt.getTime();
    if (t < 0 || t > MAX_RUN_AT_MS) {
      throw new PgQueueConfigError(
        `${where}: runAt ${runAt.toISOString()} is outside 1970-01-01 to 9999-12-31. A runAt in the past runs at once: pass new Date() for now.`,
      );
    }
    return { runAt, delayMs: 0 };
  }
  if (delayMs !== undefined) {
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
      throw new PgQueueConfigError(
        `${where}: delayMs must be a number of milliseconds from 0 to ${MAX_DELAY_MS} (100 years), got ${quote(delayMs)}.` +
          (typeof delayMs === 'number' && delayMs > MAX_DELAY_MS ? ' For a later time pass runAt.' : ''),
      );
    }
    return { runAt: null, delayMs: Math.round(delayMs) };
  }
  return { runAt: null, delayMs: 0 };
}

const KNOWN_MODULE_KEYS = [
  'dataSource',
  'connection',
  'listenConnection',
  'schema',
  'migrate',
  'workers',
  'listen',
  'pollIntervalMs',
  'leaseMs',
  'heartbeatIntervalMs',
  'rescueIntervalMs',
  'vacuumAtDeadTuples',
  'cronCatchUpMs',
  'shutdownTimeoutMs',
  'poolSize',
  'maxPayloadBytes',
  'progressIntervalMs',
  'maxProgressBytes',
  'asyncCommit',
  'preparedStatements',
  'handleUnhandledRejections',
  'logJobFailures',
  'retention',
  'historyPartitionMs',
  'defaultJobOptions',
  'connections',
] as const;
const RETENTION_KEYS = ['completedMs', 'cancelledMs', 'failedMs'] as const;
const QUEUE_KEYS = [
  'name',
  'concurrency',
  'defaultJobOptions',
  'deadLetterQueue',
  'globalConcurrency',
  'limiter',
  'repeat',
  'connection',
] as const;

/** Validates module options once, at boot, and fills in every default. */
export function resolveModuleOptions(o: PgQueueModuleOptions): ResolvedPgQueueOptions {
  if (typeof o !== 'object' || o === null) {
    throw new PgQueueConfigError('PgQueueModule.forRoot() expects an options object (it may be empty).');
  }
  refuseUnknownKeys('PgQueueModule options', o, KNOWN_MODULE_KEYS, {
    removeOnComplete: 'retention.completedMs',
    removeOnFail: 'retention.failedMs',
  });
  if (o.retention !== undefined) {
    if (typeof o.retention !== 'object' || o.retention === null) {
      throw new PgQueueConfigError(`Invalid retention: ${quote(o.retention)}. Use { completedMs?, cancelledMs?, failedMs? }.`);
    }
    refuseUnknownKeys('retention', o.retention, RETENTION_KEYS);
  }
  const leaseMs = int('leaseMs', o.leaseMs, DEFAULTS.leaseMs, 1000);
  const heartbeatIntervalMs = int('heartbeatIntervalMs', o.heartbeatIntervalMs, Math.floor(leaseMs / 3), 100);
  if (heartbeatIntervalMs >= leaseMs) {
    throw new PgQueueConfigError(
      `heartbeatIntervalMs (${heartbeatIntervalMs}) must be shorter than leaseMs (${leaseMs}), ` +
        `or leases expire between heartbeats; a third of leaseMs is a good value.`,
    );
  }
  return {
    schema: validateSchemaName(o.schema ?? DEFAULTS.schema),
    migrate: bool('migrate', o.migrate, DEFAULTS.migrate),
    workers: bool('workers', o.workers, DEFAULTS.workers),
    listen: bool('listen', o.listen, DEFAULTS.listen),
    pollIntervalMs: int('pollIntervalMs', o.pollIntervalMs, DEFAULTS.pollIntervalMs, 10),
    leaseMs,
    heartbeatIntervalMs,
    rescueIntervalMs: int('rescueIntervalMs', o.rescueIntervalMs, DEFAULTS.rescueIntervalMs, 100),
    vacuumAtDeadTuples: int('vacuumAtDeadTuples', o.vacuumAtDeadTuples, DEFAULTS.vacuumAtDeadTuples, 0),
    cronCatchUpMs: int('cronCatchUpMs', o.cronCatchUpMs, DEFAULTS.cronCatchUpMs, 0, 31 * 86_400_000),
    shutdownTimeoutMs: int('shutdownTimeoutMs', o.shutdownTimeoutMs, DEFAULTS.shutdownTimeoutMs, 0),
    poolSize: int('poolSize', o.poolSize, DEFAULTS.poolSize, 1, 100),
    maxPayloadBytes: int('maxPayloadBytes', o.maxPayloadBytes, DEFAULTS.maxPayloadBytes, 1, 256 * 1_048_576),
    progressIntervalMs: int('progressIntervalMs', o.progressIntervalMs, DEFAULTS.progressIntervalMs, 10, 3_600_000),
    maxProgressBytes: int('maxProgressBytes', o.maxProgressBytes, DEFAULTS.maxProgressBytes, 16, 1_048_576),
    asyncCommit: bool('asyncCommit', o.asyncCommit, DEFAULTS.asyncCommit),
    preparedStatements: bool('preparedStatements', o.preparedStatements, DEFAULTS.preparedStatements),
    handleUnhandledRejections: bool('handleUnhandledRejections', o.handleUnhandledRejections, DEFAULTS.handleUnhandledRejections),
    logJobFailures: oneOf('logJobFailures', o.logJobFailures, ['all', 'final', 'none'] as const, DEFAULTS.logJobFailures),
    retention: {
      completedMs: int('retention.completedMs', o.retention?.completedMs, DEFAULTS.retention.completedMs, 0, MAX_RETENTION_MS),
      cancelledMs: int('retention.cancelledMs', o.retention?.cancelledMs, DEFAULTS.retention.cancelledMs, 0, MAX_RETENTION_MS),
      failedMs:
        o.retention?.failedMs === undefined ? null : int('retention.failedMs', o.retention.failedMs, 0, 0, MAX_RETENTION_MS),
    },
    historyPartitionMs: historyPartitionMs(o.historyPartitionMs),
    defaultJobOptions: resolveJobDefaults('defaultJobOptions', o.defaultJobOptions, DEFAULTS.job),
  };
}

const HOUR_MS = 3_600_000;

/** Whole hours from one hour to 31 days: partitions start on the hour in UTC (days at midnight). */
function historyPartitionMs(value: unknown): number {
  const ms = int('historyPartitionMs', value, DEFAULTS.historyPartitionMs, HOUR_MS, 31 * 86_400_000);
  if (ms % HOUR_MS !== 0) {
    throw new PgQueueConfigError(
      `Invalid historyPartitionMs: ${ms} is not a whole number of hours. Use a multiple of 3600000 ` +
        `(3600000 for hourly partitions, 86400000 for daily), or leave it out for daily partitions.`,
    );
  }
  return ms;
}

/** Validates one `registerQueue` entry against the resolved module defaults. */
export function resolveQueueOptions(q: RegisterQueueOptions, base: ResolvedJobDefaults): ResolvedQueueOptions {
  if (typeof q !== 'object' || q === null) {
    throw new PgQueueConfigError("PgQueueModule.registerQueue() expects objects like { name: 'email' }.");
  }
  const name = validateQueueName(q.name);
  refuseUnknownKeys(`registerQueue({ name: ${quote(name)} })`, q, QUEUE_KEYS);
  return {
    name,
    concurrency: int(`queue "${name}" concurrency`, q.concurrency, DEFAULTS.concurrency, 1, 1000),
    defaultJobOptions: resolveJobDefaults(`queue "${name}" defaultJobOptions`, q.defaultJobOptions, base),
    deadLetterQueue: deadLetter(name, q.deadLetterQueue),
    globalConcurrency:
      q.globalConcurrency === undefined ? null : int(`queue "${name}" globalConcurrency`, q.globalConcurrency, 1, 1, 100_000),
    limiter: limiter(name, q.limiter),
    repeat: resolveRepeat(name, q.repeat),
    connection:
      q.connection === undefined
        ? 'default'
        : validateConnectionName(q.connection, `registerQueue({ name: ${quote(name)} }) connection`),
  };
}

function resolveRepeat(name: string, repeat: unknown): ResolvedSchedule[] {
  if (repeat === undefined) return [];
  if (!Array.isArray(repeat))
    throw new PgQueueConfigError(`queue "${name}" repeat must be an array of { name, cron, tz?, payload? }.`);
  const out = repeat.map((r: RepeatOptions, i) => resolveSchedule(name, r, `queue "${name}" repeat[${i}]`));
  const names = out.map((r) => r.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice) throw new PgQueueConfigError(`queue "${name}" repeat schedules job "${twice}" twice; one schedule per job name.`);
  return out;
}

function limiter(name: string, l: unknown): { max: number; durationMs: number } | null {
  if (l === undefined) return null;
  if (typeof l !== 'object' || l === null) {
    throw new PgQueueConfigError(
      `queue "${name}" limiter must be { max, durationMs }, for example { max: 10, durationMs: 1000 }.`,
    );
  }
  refuseUnknownKeys(`queue "${name}" limiter`, l, ['max', 'durationMs'], { duration: 'durationMs (milliseconds)' });
  const { max, durationMs } = l as { max?: unknown; durationMs?: unknown };
  if (max === undefined || durationMs === undefined) {
    throw new PgQueueConfigError(
      `queue "${name}" limiter needs both max and durationMs, for example { max: 10, durationMs: 1000 }.`,
    );
  }
  return {
    max: int(`queue "${name}" limiter.max`, max, 1, 1, 10_000),
    durationMs: int(`queue "${name}" limiter.durationMs`, durationMs, 1000, 1, 86_400_000),
  };
}

function deadLetter(name: string, dlq: unknown): string | null {
  if (dlq === undefined) return null;
  if (dlq === name) throw new PgQueueConfigError(`queue "${name}" deadLetterQueue names the queue itself; name another queue.`);
  try {
    return validateQueueName(dlq);
  } catch (err) {
    throw new PgQueueConfigError(`queue "${name}" deadLetterQueue: ${(err as Error).message}`);
  }
}
