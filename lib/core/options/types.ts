import type { JobDefaults, QueueJobDefaults } from '../job';
import type { RepeatOptions } from '../cron-schedule';
import type { PgPoolConfig } from '../pg-types';

// The option types users write (public: lib/index.ts exports them). What the code reads after
// validation is in ./resolved.ts; the defaults are in ./defaults.ts.

/** Something Nest can resolve from the container: a class, a string or a symbol. */
export type InjectionTokenLike = string | symbol | (abstract new (...args: never[]) => unknown);

/** The subset of a TypeORM `DataSource` this module reads (its connection options). */
export interface DataSourceLike {
  /** Its connection options; the queue reads the driver `type` (must be `postgres`) and the connection settings. */
  readonly options: { readonly type: string };
}

/** Options of `PgQueueModule.forRoot`. Every field is optional; defaults are listed per field. */
export interface PgQueueModuleOptions {
  /**
   * A TypeORM `DataSource` (or its DI token) whose connection settings the queue reuses for its own
   * small pool. @default the app's default DataSource, when `@nestjs/typeorm` provides one
   */
  dataSource?: DataSourceLike | InjectionTokenLike;
  /**
   * A connection string or `pg` PoolConfig, for apps without TypeORM. Wins over `dataSource`.
   * @default undefined (the `dataSource`'s settings)
   */
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
  /**
   * The role expected to own the queue's schema. The boot fails if another role owns it: the
   * owner of the schema can replace the queue's tables, functions and triggers. Set it to the
   * migration role when migrations run as another role than the app (docs/security.md);
   * `false` turns the check off.
   * @default the app's own role, or a role it is a member of
   * @example schemaOwner: 'app_migrator'
   */
  schemaOwner?: string | false;
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
   * How long opening one connection (pool or LISTEN) may take before it fails: a host that drops
   * packets, or a port where something other than PostgreSQL answers, then fails the boot with a
   * message naming host and port instead of hanging it. Used where the connection's own settings
   * set none (pg's `connectionTimeoutMillis`, TypeORM's `connectTimeoutMS`); unlike those, it does
   * not limit how long a query waits for a free pool connection. From 100 to 600000.
   * @default 10_000
   */
  connectTimeoutMs?: number;
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
  /**
   * Cross-process events (docs/events.md). `publish`: every outcome statement (completed, failed,
   * retrying, cancelled, snoozed, dead-lettered, stalled, progress) also sends one NOTIFY per
   * batch on `<schema>_events`, which `@OnQueueEvent`, `queue.events()` and
   * `job.waitUntilFinished()` hear in any process. Set false where nothing listens, to save that
   * NOTIFY; waits then fall back to polling the row.
   * @default { publish: true }
   */
  events?: { publish?: boolean };
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
   * Caps of the log each job keeps (`job.log(line)`, read with `queue.getJobLogs()`), across its
   * attempts. A line longer than `maxLineBytes` (UTF-8) is cut to that length, ending in `…`.
   * The first lines are kept: once a job holds `maxLines` lines or `maxBytes` bytes of them,
   * later lines are dropped and counted (`dropped` of `getJobLogs()`). Buffered lines are
   * written at most once per `progressIntervalMs` per worker, and at the end of each attempt.
   * @default { maxLines: 1000, maxLineBytes: 4096, maxBytes: 262_144 }
   */
  jobLogs?: { maxLines?: number; maxLineBytes?: number; maxBytes?: number };
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
   * How long finished jobs stay in the history table. Completed and cancelled jobs live in
   * partitions by finish time (`historyPartitionMs`): the maintenance node drops a whole
   * partition once all of it is past retention (no row deleted, so no dead tuples to vacuum), so a
   * job stays between its retention and its retention plus one partition. A state whose
   * retention is shorter than a partition is deleted row by row instead, a thousand at a time.
   * `completedMs: 0` keeps no history of completed jobs at all. Failed jobs live in a partition
   * that is never dropped: they stay until retried or removed, unless `failedMs` is set (then
   * they are deleted row by row).
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
  /**
   * Job options every queue starts from.
   * @default {} (each job option's own default: `attempts: 3`, exponential backoff from 1 s, priority 0)
   */
  defaultJobOptions?: JobDefaults;
  /**
   * More databases for queues, by name: `registerQueue({ name, connection: 'bulk' })` puts a queue
   * on one. Each gets its own pool, LISTEN connection, migrations and maintenance. The `default`
   * entry, if given, replaces the top-level `connection`/`dataSource`/`listenConnection`; the
   * other fields of an entry (schema, poolSize, ...) default to the top-level ones. A queue on
   * another database than the app's data loses atomic enqueue with that data: see
   * docs/multiple-databases.md. @default {} (every queue on the default connection)
   */
  connections?: Readonly<Record<string, PgQueueConnectionOptions>>;
}

/**
 * One database of `forRoot({ connections })`: where it is (`connection` or `dataSource`, and
 * `listenConnection`), and the settings that may differ per database. Left out, each setting
 * takes the top-level option's value (then its default).
 */
export interface PgQueueConnectionOptions {
  /**
   * A TypeORM `DataSource` (or its DI token) whose connection settings this database's pool reuses.
   * @default undefined (a named database needs `connection` or `dataSource`; only `default` falls back to the app's DataSource)
   */
  dataSource?: DataSourceLike | InjectionTokenLike;
  /**
   * A connection string or `pg` PoolConfig. Wins over `dataSource`.
   * @default undefined (a named database needs `connection` or `dataSource`; only `default` falls back to the app's DataSource)
   */
  connection?: string | PgPoolConfig;
  /**
   * A direct connection for LISTEN, when `connection` goes through PgBouncer in transaction mode.
   * @default the same settings as this database's pool
   */
  listenConnection?: string | PgPoolConfig;
  /** Schema of the queue's tables in this database. @default the top-level `schema` */
  schema?: string;
  /** Apply pending migrations to this database at boot. @default the top-level `migrate` */
  migrate?: boolean;
  /** LISTEN for wake-ups on this database. @default the top-level `listen` */
  listen?: boolean;
  /** Maximum connections of this database's pool. @default the top-level `poolSize` */
  poolSize?: number;
  /** How long opening a connection to this database may take. @default the top-level `connectTimeoutMs` */
  connectTimeoutMs?: number;
  /** Prepare the hot statements on this database's connections. @default the top-level `preparedStatements` */
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
  /**
   * Job options of this queue, over the module's; `group` here is a function of the payload
   * (docs/groups.md). @default {} (the module's `defaultJobOptions`)
   */
  defaultJobOptions?: QueueJobDefaults;
  /**
   * A job of this queue that fails its last attempt moves to this queue instead, waiting, with
   * its attempts reset and its errors kept, for a `@Processor` of that queue to handle (alert,
   * park, repair and re-add). Without it, failed jobs stay in history as `failed`.
   * @default undefined (no dead-letter queue)
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
  /**
   * Makes the queue grouped (docs/groups.md): jobs added with `{ group: 'tenant-42' }` take fair
   * turns between groups at every claim, within the per-group limits set here (each across every
   * node). Not with `globalConcurrency` or `limiter`. @default undefined (not grouped)
   */
  group?: QueueGroupOptions;
  /** Recurring jobs of this queue, each enqueued once per tick across all nodes. @default [] */
  repeat?: RepeatOptions[];
  /**
   * The named connection (`forRoot({ connections })`) whose database holds this queue.
   * @default 'default'
   */
  connection?: string;
  /**
   * How long this queue's finished jobs stay in history, each field over the module's
   * `retention` (the same fields and limits). A queue that keeps them shorter than the others has
   * its rows deleted in batches by the maintenance pass; one that keeps them longer keeps every
   * history partition that long, and the other queues' rows in them are deleted in batches.
   * Give every node the same (a node knows only the queues its app registers). Not per job name:
   * see docs/operations.md.
   * @default undefined (the module's `retention`)
   */
  retention?: { completedMs?: number; cancelledMs?: number; failedMs?: number };
}

/** `registerQueue({ group })`: how the jobs of one group share the queue (docs/groups.md). */
export interface QueueGroupOptions {
  /**
   * At most this many jobs of any one group run at once, across every node;
   * `queue.setGroupConcurrency(group, n)` overrides it for one group at runtime.
   * @default undefined (no per-group limit: groups only take fair turns)
   */
  concurrency?: number;
  /**
   * 'fifo': one running job per group, and the next only after it ends, in the order they were
   * added (a job waiting for its retry's backoff, or delayed, holds up its group).
   * @default 'fair' (turns between groups; within a group, priority, then run time)
   */
  order?: 'fair' | 'fifo';
  /** At most `max` jobs of any one group start in any `durationMs` window, across every node. @default undefined */
  limiter?: { max: number; durationMs: number };
}
