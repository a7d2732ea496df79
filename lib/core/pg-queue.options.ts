import type { PoolConfig } from 'pg';
import { PgQueueConfigError } from './errors';
import type { BackoffOptions, JobDefaults, JobOptions } from './job';
import { resolveSchedule, type RepeatOptions, type ResolvedSchedule } from './cron-schedule';

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
  connection?: string | PoolConfig;
  /**
   * A direct (not PgBouncer) connection for LISTEN, when `connection` goes through PgBouncer in
   * transaction mode. @default the same settings as the pool
   */
  listenConnection?: string | PoolConfig;
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
   * Let claims, job outcomes and heartbeats commit without waiting for the WAL flush
   * (`synchronous_commit = off` for those statements only). Several times the drain rate; the
   * cost is that a PostgreSQL crash (not a clean restart) can forget the last fraction of a
   * second of them, and those jobs run again. Enqueues always commit durably.
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
  /** Job options every queue starts from. */
  defaultJobOptions?: JobDefaults;
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
  readonly asyncCommit: boolean;
  readonly preparedStatements: boolean;
  readonly handleUnhandledRejections: boolean;
  readonly logJobFailures: JobFailureLogging;
  readonly retention: { readonly completedMs: number; readonly cancelledMs: number; readonly failedMs: number | null };
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
  asyncCommit: true,
  preparedStatements: true,
  handleUnhandledRejections: true,
  logJobFailures: 'all' as JobFailureLogging,
  retention: { completedMs: 86_400_000, cancelledMs: 86_400_000 },
  concurrency: 10,
  job: {
    priority: 0,
    attempts: 3,
    backoff: { type: 'exponential', delayMs: 1000, maxDelayMs: 3_600_000, jitter: true },
    timeoutMs: null,
  } satisfies ResolvedJobDefaults,
} as const;

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,47}$/;
const QUEUE_RE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;

/** Throws unless `schema` is a plain lower-case identifier (it is also always quoted in SQL). */
export function validateSchemaName(schema: unknown): string {
  if (typeof schema !== 'string' || !SCHEMA_RE.test(schema)) {
    throw new PgQueueConfigError(
      `Invalid schema ${JSON.stringify(schema)}: use 1-48 characters of lower-case letters, digits ` +
        `and "_", not starting with a digit (for example "pgqueue").`,
    );
  }
  return schema;
}

/** Throws unless `name` is a valid queue name. */
export function validateQueueName(name: unknown): string {
  if (typeof name !== 'string' || !QUEUE_RE.test(name)) {
    throw new PgQueueConfigError(
      `Invalid queue name ${JSON.stringify(name)}: use 1-100 characters of letters, digits, "_", "-", ` +
        `"." or ":", starting with a letter or digit (for example "email").`,
    );
  }
  return name;
}

/** Throws unless `name` is a valid job name. */
export function validateJobName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 200 || name.includes('\u0000')) {
    throw new PgQueueConfigError(
      `Invalid job name ${JSON.stringify(name)}: use a non-empty string of at most 200 characters.`,
    );
  }
  return name;
}

function int(where: string, value: unknown, fallback: number, min: number, max = 2 ** 31 - 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new PgQueueConfigError(
      `Invalid ${where}: ${String(value)}. Use a whole number from ${min} to ${max}, or leave it out ` +
        `for the default (${fallback}).`,
    );
  }
  return value;
}

function bool(where: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new PgQueueConfigError(`Invalid ${where}: ${String(value)}. Use true or false.`);
  }
  return value;
}

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
  if (typeof b !== 'object' || b === null || (b.type !== 'fixed' && b.type !== 'exponential')) {
    throw new PgQueueConfigError(
      `Invalid ${where}.backoff: ${JSON.stringify(b)}. Use { type: 'fixed' | 'exponential', delayMs?, maxDelayMs?, jitter? }.`,
    );
  }
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

/** Layers `opts` over `base`, validating each field; `where` names the option in errors. */
export function resolveJobDefaults(where: string, opts: JobOptions | undefined, base: ResolvedJobDefaults): ResolvedJobDefaults {
  if (opts === undefined) return base;
  if (typeof opts !== 'object' || opts === null) {
    throw new PgQueueConfigError(`Invalid ${where}: expected an object of job options.`);
  }
  if (where.endsWith('defaultJobOptions') && ('uniqueKey' in opts || 'replaceWaiting' in opts)) {
    throw new PgQueueConfigError(`Invalid ${where}: uniqueKey and replaceWaiting are per job; pass them to add(), not as defaults.`);
  }
  return {
    priority: int(`${where}.priority`, opts.priority, base.priority, -(2 ** 31)),
    attempts: int(`${where}.attempts`, opts.attempts, base.attempts, 1),
    backoff: resolveBackoff(where, opts.backoff, base.backoff),
    timeoutMs: opts.timeoutMs === undefined ? base.timeoutMs : int(`${where}.timeoutMs`, opts.timeoutMs, 0, 1),
  };
}

const KNOWN_MODULE_KEYS = new Set<string>([
  'dataSource', 'connection', 'listenConnection', 'schema', 'migrate', 'workers', 'listen',
  'pollIntervalMs', 'leaseMs', 'heartbeatIntervalMs', 'rescueIntervalMs', 'vacuumAtDeadTuples', 'cronCatchUpMs', 'shutdownTimeoutMs',
  'poolSize', 'maxPayloadBytes', 'asyncCommit', 'preparedStatements', 'handleUnhandledRejections', 'logJobFailures', 'retention',
  'defaultJobOptions',
]);

/** Validates module options once, at boot, and fills in every default. */
export function resolveModuleOptions(o: PgQueueModuleOptions): ResolvedPgQueueOptions {
  if (typeof o !== 'object' || o === null) {
    throw new PgQueueConfigError('PgQueueModule.forRoot() expects an options object (it may be empty).');
  }
  const unknown = Object.keys(o).filter((k) => !KNOWN_MODULE_KEYS.has(k));
  if (unknown.length) {
    throw new PgQueueConfigError(
      `Unknown PgQueueModule option(s): ${unknown.join(', ')}. Known options: ${[...KNOWN_MODULE_KEYS].join(', ')}.`,
    );
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
    asyncCommit: bool('asyncCommit', o.asyncCommit, DEFAULTS.asyncCommit),
    preparedStatements: bool('preparedStatements', o.preparedStatements, DEFAULTS.preparedStatements),
    handleUnhandledRejections: bool('handleUnhandledRejections', o.handleUnhandledRejections, DEFAULTS.handleUnhandledRejections),
    logJobFailures: oneOf('logJobFailures', o.logJobFailures, ['all', 'final', 'none'] as const, DEFAULTS.logJobFailures),
    retention: {
      completedMs: int('retention.completedMs', o.retention?.completedMs, DEFAULTS.retention.completedMs, 0),
      cancelledMs: int('retention.cancelledMs', o.retention?.cancelledMs, DEFAULTS.retention.cancelledMs, 0),
      failedMs: o.retention?.failedMs === undefined ? null : int('retention.failedMs', o.retention.failedMs, 0, 0),
    },
    defaultJobOptions: resolveJobDefaults('defaultJobOptions', o.defaultJobOptions, DEFAULTS.job),
  };
}

/** Validates one `registerQueue` entry against the resolved module defaults. */
export function resolveQueueOptions(q: RegisterQueueOptions, base: ResolvedJobDefaults): ResolvedQueueOptions {
  if (typeof q !== 'object' || q === null) {
    throw new PgQueueConfigError("PgQueueModule.registerQueue() expects objects like { name: 'email' }.");
  }
  const name = validateQueueName(q.name);
  return {
    name,
    concurrency: int(`queue "${name}" concurrency`, q.concurrency, DEFAULTS.concurrency, 1, 1000),
    defaultJobOptions: resolveJobDefaults(`queue "${name}" defaultJobOptions`, q.defaultJobOptions, base),
    deadLetterQueue: deadLetter(name, q.deadLetterQueue),
    globalConcurrency: q.globalConcurrency === undefined ? null : int(`queue "${name}" globalConcurrency`, q.globalConcurrency, 1, 1, 100_000),
    limiter: limiter(name, q.limiter),
    repeat: resolveRepeat(name, q.repeat),
  };
}

function resolveRepeat(name: string, repeat: unknown): ResolvedSchedule[] {
  if (repeat === undefined) return [];
  if (!Array.isArray(repeat)) throw new PgQueueConfigError(`queue "${name}" repeat must be an array of { name, cron, tz?, payload? }.`);
  const out = repeat.map((r: RepeatOptions, i) => resolveSchedule(name, r, `queue "${name}" repeat[${i}]`));
  const names = out.map((r) => r.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice) throw new PgQueueConfigError(`queue "${name}" repeat schedules job "${twice}" twice; one schedule per job name.`);
  return out;
}

function limiter(name: string, l: unknown): { max: number; durationMs: number } | null {
  if (l === undefined) return null;
  if (typeof l !== 'object' || l === null) {
    throw new PgQueueConfigError(`queue "${name}" limiter must be { max, durationMs }, for example { max: 10, durationMs: 1000 }.`);
  }
  const { max, durationMs } = l as { max?: unknown; durationMs?: unknown };
  if (max === undefined || durationMs === undefined) {
    throw new PgQueueConfigError(`queue "${name}" limiter needs both max and durationMs, for example { max: 10, durationMs: 1000 }.`);
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
