import { Pool } from 'pg';
import { listenClientConfig, queuePoolConfig } from '../db/connection';
import { explainConnectFailure, isServerError } from '../db/connect-probe';
import { JobStore } from '../db/job-store';
import { poolExecutor } from '../db/executor';
import { databaseIdentity } from '../db/identity';
import type { PgClientConfig, PgPool, PgPoolConfig } from '../core/pg-types';
import { HistoryPartitions } from '../db/history/partitions';
import { currentVersion, latestVersion, migrate } from '../db/migrator';
import { checkSchemaOwner } from '../db/schema-owner';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import type { EngineLogger } from '../worker/logger';
import { Supervisor } from '../worker/supervisor';
import { EventsHub } from '../worker/queue-events-hub';
import { QueueSubscription } from '../worker/queue-subscription';
import { waitForJob } from '../worker/wait-for-job';
import type { QueueEvents, WaitForJobOptions } from '../core/queue-events';
import type { ResolvedPgQueueOptions } from '../core/options/resolved';

/**
 * One database of the runtime (`forRoot`'s default connection, or an entry of `connections`):
 * its pool, its store, and its supervisor, which runs the workers of the queues that live there,
 * its LISTEN connection, and its maintenance (elected among the nodes using that database).
 */
export class PgQueueConnection {
  readonly store: JobStore;
  readonly supervisor: Supervisor;
  /** The cross-process events of this database: LISTENs only once something subscribes (queue-events-hub.ts). */
  readonly events: EventsHub;

  private constructor(
    readonly name: string,
    readonly options: ResolvedPgQueueOptions,
    readonly pool: PgPool,
    /** `system_identifier/database` of the server the pool is on (see lib/db/identity.ts); '' with one connection. */
    readonly identity: string,
    listen: PgClientConfig | null,
    logger: EngineLogger,
    manual: boolean,
  ) {
    this.store = new JobStore(pool, {
      schema: options.schema,
      retention: options.retention,
      historyPartitionMs: options.historyPartitionMs,
      asyncCommit: options.asyncCommit,
      preparedStatements: options.preparedStatements,
      publishEvents: options.events.publish,
      poolSize: options.poolSize,
      warn: (m) => logger.warn(m),
    });
    this.supervisor = new Supervisor(this.store, options, listen, logger);
    this.events = new EventsHub({ connection: listen, channel: this.store.events.channel, reads: this.store.events, logger });
    this.logger = logger;
    if (manual) this.supervisor.setManual();
  }

  /**
   * Connects, then migrates (or checks the schema version), so a bad setup fails the boot.
   * `identify`: ask the database's identity (an app of more than one connection compares them);
   * `manual`: the supervisor runs its workers only when told (PgQueueTestingModule).
   */
  static async open(
    name: string,
    options: ResolvedPgQueueOptions,
    conn: { pool: PgPoolConfig; listen: PgClientConfig },
    logger: EngineLogger,
    { identify = false, manual = false }: { identify?: boolean; manual?: boolean } = {},
  ): Promise<PgQueueConnection> {
    // What a named connection's pool, listener and workers log says which database it is about.
    if (name !== 'default') logger = onConnection(logger, name);
    const pool = new Pool(queuePoolConfig(conn.pool, options));
    // An idle connection that the server drops (restart, pg_terminate_backend) must not crash
    // the process: the pool discards it and opens a new one on the next query.
    pool.on('error', (err) => logger.warn(`pg-queue pool: idle connection lost (${err.message})`));
    // A worker node opens its pool's connections now, while the boot below waits on its own
    // round trips, rather than at its first claim: the listener, the stored limits' read, the
    // heartbeat and the first claims all go out at once then, and each opened a connection on
    // the way to the first job (a connect took 20-86 ms on a loaded 2-core machine; bench/,
    // BENCH_TRACE, issue 30). Errors are the boot queries' to report; the pool's idle timeout
    // closes what a quiet node does not use.
    if (options.workers && !manual) warmPool(pool, options.poolSize);
    const on = name === 'default' ? '' : ` (connection "${name}")`;
    let identity: string;
    try {
      // Before the migration, which would otherwise build the queue in a schema another role owns.
      await checkSchemaOwner(poolExecutor(pool), options.schema, options.schemaOwner, on);
      if (options.migrate) {
        const applied = await migrate(pool, options.schema);
        if (applied.length) logger.log(`Applied migration(s) ${applied.join(', ')} to schema "${options.schema}"`);
      } else {
        const have = await currentVersion(pool, options.schema);
        const need = latestVersion();
        if (have < need) {
          throw new PgQueueConfigError(
            `Schema "${options.schema}"${on} is at version ${have}; this nestjs-pg-queue needs ${need}. ` +
              'Set migrate: true, or run the PgQueue TypeORM migrations (pgQueueMigrations()) before boot.',
          );
        }
      }
      // The history's partitions for now and the next intervals exist before any job finishes
      // (see HistoryPartitions.ensureAhead); the maintenance pass keeps them ahead afterwards.
      // Never fatal: the default partition takes the rows until a later pass succeeds.
      await new HistoryPartitions(pool, options.schema, options.historyPartitionMs, (m) => logger.warn(m))
        .ensureAhead()
        .catch((err: Error) => logger.warn(`pg-queue history partitions not created at boot: ${err.message}`));
      // Only an app with more than one connection compares identities: one with a single
      // connection boots exactly as before, with no query more.
      identity = identify ? await databaseIdentity(poolExecutor(pool)) : '';
    } catch (err) {
      await pool.end().catch(() => undefined);
      if (err instanceof PgQueueError) throw err;
      // Not reached (nothing answered in time, or something that is not PostgreSQL did): say
      // which, at which host and port, instead of pg's "timeout expired".
      if (!isServerError(err)) {
        const timeoutMs = conn.pool.connectionTimeoutMillis || options.connectTimeoutMs;
        const message = await explainConnectFailure(conn.pool, timeoutMs, (err as Error).message);
        throw new PgQueueConfigError(`${message}${on}`, { cause: err });
      }
      const where =
        conn.pool.connectionString ?? `${conn.pool.host ?? 'localhost'}:${conn.pool.port ?? 5432}/${conn.pool.database ?? ''}`;
      throw new PgQueueError(
        `nestjs-pg-queue cannot use the database at ${where.replace(/\/\/[^@/]*@/, '//***@')}${on}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const listen = options.listen ? listenClientConfig(conn.listen, options.connectTimeoutMs) : null;
    return new PgQueueConnection(name, options, pool, identity, listen, logger, manual);
  }

  private readonly logger: EngineLogger;

  /** A new subscription to `queue`'s cross-process events (`queue.events()`). */
  queueEvents(queue: string): QueueEvents {
    if (!this.events.canListen) {
      // Subscribing would hear nothing, for ever, without a word.
      const on = this.name === 'default' ? '' : ` (connection "${this.name}")`;
      throw new PgQueueConfigError(
        `The events of queue "${queue}" (queue.events(), @OnQueueEvent) need a LISTEN connection, and this app runs ` +
          `poll-only (listen: false)${on}. Set listen: true, with listenConnection pointing at PostgreSQL directly ` +
          'behind PgBouncer in transaction mode; waitForJob() and job.waitUntilFinished() work either way (they poll).',
      );
    }
    return new QueueSubscription(queue, this.events, this.logger);
  }

  /** Waits for job `id` of `queue` to finish (`queue.waitForJob()`). */
  waitForJob<R>(queue: string, id: string, opts: WaitForJobOptions | undefined): Promise<R> {
    return waitForJob<R>(this.events, this.store.events, queue, id, opts);
  }

  /** Stops the workers (gracefully), then the events (subscriptions end, waits reject), then closes the pool. */
  async close(): Promise<void> {
    await this.supervisor.stop();
    await this.events.stop();
    await this.pool.end();
  }
}

/** `logger` with ` (connection "name")` after each message. */
function onConnection(logger: EngineLogger, name: string): EngineLogger {
  const tag = (m: string) => `${m} (connection "${name}")`;
  return {
    log: (m) => logger.log(tag(m)),
    warn: (m) => logger.warn(tag(m)),
    error: (m, stack) => logger.error(tag(m), stack),
    ...(logger.debug ? { debug: (m: string) => logger.debug!(tag(m)) } : {}),
  };
}

/** Opens up to `n` connections of `pool` in the background and puts them back idle. */
function warmPool(pool: Pool, n: number): void {
  for (let i = 0; i < n; i++) {
    pool.connect().then(
      (c) => c.release(),
      () => undefined,
    );
  }
}
