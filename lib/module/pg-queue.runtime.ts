import { Pool, type PoolConfig } from 'pg';
import { JobStore } from '../db/job-store';
import type { SqlExecutor } from '../db/executor';
import type { PgClientConfig, PgPool, PgPoolConfig } from '../core/pg-types';
import { currentVersion, latestVersion, migrate } from '../db/migrator';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import type { EngineLogger } from '../worker/logger';
import { Supervisor } from '../worker/supervisor';
import { Queue } from '../producer/queue';
import { FlowProducer } from '../producer/flow';
import {
  resolveQueueOptions,
  validateQueueName,
  type RegisterQueueOptions,
  type ResolvedPgQueueOptions,
  type ResolvedQueueOptions,
} from '../core/pg-queue.options';

/**
 * One application's queue runtime: the pool, the store, the supervisor and the registered
 * queues. Created once per `PgQueueModule.forRoot`, never global to the process.
 */
export class PgQueueRuntime {
  readonly store: JobStore;
  readonly supervisor: Supervisor;
  private readonly registered = new Map<string, ResolvedQueueOptions>();
  private readonly queues = new Map<string, Queue>();
  private closed = false;

  private constructor(
    readonly options: ResolvedPgQueueOptions,
    readonly pool: PgPool,
    listen: PgClientConfig | null,
    logger: EngineLogger,
  ) {
    this.store = new JobStore(pool, {
      schema: options.schema,
      retention: options.retention,
      asyncCommit: options.asyncCommit,
      preparedStatements: options.preparedStatements,
    });
    this.supervisor = new Supervisor(this.store, options, listen, logger);
    this.flows = new FlowProducer(
      this.store,
      (name) => this.queue(name, 'QueueService.addFlow'),
      () => this.ambientTransaction(),
    );
  }

  /** Creates flows (trees of jobs across queues): `QueueService.addFlow`. */
  readonly flows: FlowProducer;

  /** Connects, then migrates (or checks the schema version), so a bad setup fails the boot. */
  static async create(
    options: ResolvedPgQueueOptions,
    conn: { pool: PgPoolConfig; listen: PgClientConfig },
    logger: EngineLogger,
  ): Promise<PgQueueRuntime> {
    // PgPoolConfig mirrors pg's PoolConfig field by field (checked here), but types the client
    // class a custom `Client` must construct by the little this package calls on it.
    const pool = new Pool({ ...conn.pool, Client: conn.pool.Client as PoolConfig['Client'], max: options.poolSize });
    // An idle connection that the server drops (restart, pg_terminate_backend) must not crash
    // the process: the pool discards it and opens a new one on the next query.
    pool.on('error', (err) => logger.warn(`pg-queue pool: idle connection lost (${err.message})`));
    try {
      if (options.migrate) {
        const applied = await migrate(pool, options.schema);
        if (applied.length) logger.log(`Applied migration(s) ${applied.join(', ')} to schema "${options.schema}"`);
      } else {
        const have = await currentVersion(pool, options.schema);
        const need = latestVersion();
        if (have < need) {
          throw new PgQueueConfigError(
            `Schema "${options.schema}" is at version ${have}; this nestjs-pg-queue needs ${need}. ` +
              'Set migrate: true, or run the PgQueue TypeORM migrations (pgQueueMigrations()) before boot.',
          );
        }
      }
    } catch (err) {
      await pool.end().catch(() => undefined);
      if (err instanceof PgQueueError) throw err;
      const where =
        conn.pool.connectionString ?? `${conn.pool.host ?? 'localhost'}:${conn.pool.port ?? 5432}/${conn.pool.database ?? ''}`;
      throw new PgQueueError(
        `nestjs-pg-queue cannot use the database at ${where.replace(/\/\/[^@/]*@/, '//***@')}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    return new PgQueueRuntime(options, pool, options.listen ? conn.listen : null, logger);
  }

  /** Registers a queue (from `registerQueue`); the same name twice must mean the same options. */
  registerQueue(opts: RegisterQueueOptions): Queue {
    const resolved = resolveQueueOptions(opts, this.options.defaultJobOptions);
    const prev = this.registered.get(resolved.name);
    if (prev && JSON.stringify(prev) !== JSON.stringify(resolved)) {
      throw new PgQueueConfigError(
        `Queue "${resolved.name}" is registered twice with different options; register it once, or with the same options.`,
      );
    }
    if (!prev) this.registered.set(resolved.name, resolved);
    return this.queue(resolved.name);
  }

  /** The queue's resolved options, if it was registered. */
  queueOptions(name: string): ResolvedQueueOptions | undefined {
    return this.registered.get(name);
  }

  get registeredQueues(): ResolvedQueueOptions[] {
    return [...this.registered.values()];
  }

  /** The caller's implicit transaction (@nestjs-cls/transactional), if any: add() joins it. */
  ambientTransaction: () => SqlExecutor | undefined = () => undefined;

  /**
   * The producer of a registered queue. A name this app never registered throws: a job enqueued
   * there would wait forever, silently, for a worker no process declares (a misspelt name).
   * @param caller who asked, for the message (e.g. `QueueService.add`)
   */
  queue(name: string, caller?: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      validateQueueName(name);
      const registered = this.registered.get(name);
      if (!registered)
        throw new PgQueueConfigError(
          notRegisteredMessage(
            name,
            this.registeredQueues.map((r) => r.name),
            caller && `${caller}('${name}')`,
          ),
        );
      const defaults = registered.defaultJobOptions;
      q = new Queue(
        name,
        this.store,
        defaults,
        this.options.maxPayloadBytes,
        (queue, job, count) => this.supervisor.emit('enqueued', queue, job, count),
        () => this.supervisor.listenerCount('enqueued') > 0,
        () => this.ambientTransaction(),
      );
      this.queues.set(name, q);
    }
    return q;
  }

  /**
   * Throws when a registered queue names a deadLetterQueue this app does not register: its
   * failed jobs would move to a queue no process declares, where nothing runs or shows them.
   */
  checkDeadLetterQueues(): void {
    for (const q of this.registered.values()) {
      if (q.deadLetterQueue !== null && !this.registered.has(q.deadLetterQueue)) {
        throw new PgQueueConfigError(
          `Queue "${q.name}" names deadLetterQueue "${q.deadLetterQueue}", which is not registered in this app. ` +
            `Add PgQueueModule.registerQueue({ name: '${q.deadLetterQueue}' }) to the imports of a module (with a @Processor ` +
            `for it where its jobs should run), or remove deadLetterQueue from "${q.name}".`,
        );
      }
    }
  }

  /** Stops the workers (gracefully), then closes the pool. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.supervisor.stop();
    await this.pool.end();
  }
}

/**
 * What to do about a queue name this app never registered. Shared by the producer (add, getQueue)
 * and by boot (@InjectQueue), so both say the same thing.
 */
export function notRegisteredMessage(name: string, registered: readonly string[], where?: string): string {
  return (
    `${where ? `${where}: q` : 'Q'}ueue "${name}" is not registered in this app, so no process would ever run its jobs. ` +
    `Add PgQueueModule.registerQueue({ name: '${name}' }) to the imports of a module; a producer-only process ` +
    `(workers: false) registers the queues it enqueues to as well. ` +
    `Registered queues: ${registered.length ? registered.map((n) => `"${n}"`).join(', ') : '(none)'}.`
  );
}
