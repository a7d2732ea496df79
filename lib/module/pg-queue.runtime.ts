import type { SqlExecutor } from '../db/executor';
import { databaseIdentity } from '../db/identity';
import type { JobStore } from '../db/job-store';
import type { PgClientConfig, PgPool, PgPoolConfig } from '../core/pg-types';
import { PgQueueConfigError } from '../core/errors';
import type { EngineLogger } from '../worker/logger';
import type { Supervisor } from '../worker/supervisor';
import type { AppTransaction } from '../worker/steps';
import { Queue } from '../producer/queue';
import { FlowProducer } from '../producer/flow';
import { DEFAULT_CONNECTION, unknownConnectionMessage } from '../core/connections';
import { validateQueueName } from '../core/names';
import type { RegisterQueueOptions } from '../core/options/types';
import type { ResolvedPgQueueOptions, ResolvedQueueOptions } from '../core/options/resolved';
import { resolveQueueOptions } from '../core/options/module-checks';
import { isBareRegistration, mergeRegistrations, sameRegistration } from '../core/options/queue-registrations';
import type { PgQueueReadApi } from '../core/read-api';
import { PgQueueConnection } from './pg-queue.connection';

/** One database to open: its name, resolved options, and pool and listener settings. */
export interface OpenConnection {
  readonly name: string;
  readonly options: ResolvedPgQueueOptions;
  readonly conn: { pool: PgPoolConfig; listen: PgClientConfig };
  /** The app's DataSource transaction, when this connection's settings come from a TypeORM DataSource. */
  readonly appTransaction?: AppTransaction;
}

/** What the runtime is built with besides its connections: it is whole once `create` answers. */
export interface RuntimeSetup {
  readonly logger: EngineLogger;
  /** The caller's implicit transaction (@nestjs-cls/transactional), if any. @default none */
  readonly ambientTransaction?: () => SqlExecutor | undefined;
  /** Every supervisor in manual mode (PgQueueTestingModule): the tester runs the workers. @default false */
  readonly manual?: boolean;
}

/**
 * One application's queue runtime: its connections (one per database, each with its pool,
 * store and supervisor) and the registered queues. Created once per `PgQueueModule.forRoot`,
 * never global to the process. `store`, `supervisor`, `pool` and `options` are the default
 * connection's.
 */
export class PgQueueRuntime implements PgQueueReadApi {
  readonly store: JobStore;
  readonly supervisor: Supervisor;
  readonly pool: PgPool;
  readonly options: ResolvedPgQueueOptions;
  private readonly registered = new Map<string, ResolvedQueueOptions>();
  private readonly queues = new Map<string, Queue>();
  /** Queues of registerQueueAsync whose factory has not answered yet (declareQueues). */
  private readonly pending = new Map<string, Deferred>();
  /** What each manager or client of a caller's transaction is on: asked once per object. */
  private readonly targetIdentity = new WeakMap<object, Promise<string>>();
  private closed = false;

  /** The caller's implicit transaction (@nestjs-cls/transactional), if any: add() joins it. */
  readonly ambientTransaction: () => SqlExecutor | undefined;

  private constructor(
    private readonly byName: ReadonlyMap<string, PgQueueConnection>,
    ambientTransaction: (() => SqlExecutor | undefined) | undefined,
  ) {
    this.ambientTransaction = ambientTransaction ?? (() => undefined);
    // A handler's completeWith() transaction must be on its job's database, as an enqueue's.
    if (byName.size > 1) {
      for (const c of byName.values()) c.supervisor.onOwnDatabase = (exec) => this.onDatabaseOf(c, exec, null);
    }
    const def = byName.get(DEFAULT_CONNECTION)!;
    this.store = def.store;
    this.supervisor = def.supervisor;
    this.pool = def.pool;
    this.options = def.options;
    this.flows = new FlowProducer((name) => this.queue(name, 'QueueService.addFlow'));
  }

  /** Creates flows (trees of jobs across queues of one database): `QueueService.addFlow`. */
  readonly flows: FlowProducer;

  /**
   * The listeners of every connection as one, for health and metrics: the one down longest if
   * any is down, else connected; null when no connection listens (poll-only). In an app of more
   * than one connection it names its connection, so health can say which database's is down.
   */
  get listenerState(): (NonNullable<Supervisor['listenerState']> & { readonly connection?: string }) | null {
    const named = this.connections.length > 1;
    const states = this.connections.flatMap((c) => {
      const l = c.supervisor.listenerState;
      return l === null ? [] : [named ? { ...l, connection: c.name } : l];
    });
    const down = states.filter((l) => !l.connected);
    down.sort((a, b) => (a.disconnectedSince ?? Infinity) - (b.disconnectedSince ?? Infinity));
    return down[0] ?? states[0] ?? null;
  }

  /**
   * How many worker processes heartbeat into any connection's nodes registry now, for health and
   * metrics: a node with queues on two databases is in both registries and counts once.
   */
  async liveNodes(): Promise<number> {
    const ids = await Promise.all(this.connections.map((c) => c.store.liveNodeIds()));
    return new Set(ids.flat()).size;
  }

  /** True while the workers of every connection run. */
  get workersRunning(): boolean {
    return this.connections.every((c) => c.supervisor.running);
  }

  /** Every connection, the default first. */
  get connections(): PgQueueConnection[] {
    return [...this.byName.values()];
  }

  /** The connection of a registered queue (the default for a name this app never registered). */
  connectionOf(queue: string): PgQueueConnection {
    return this.byName.get(this.registered.get(queue)?.connection ?? DEFAULT_CONNECTION)!;
  }

  /**
   * Opens every connection (default first), so a bad setup fails the boot; on a failure closes
   * those already open. Two connections on the same database and schema are refused: they would
   * be one queue store with two sets of maintenance.
   */
  static async create(connections: readonly OpenConnection[], setup: RuntimeSetup): Promise<PgQueueRuntime> {
    const open = new Map<string, PgQueueConnection>();
    try {
      for (const c of connections) {
        const opened = await PgQueueConnection.open(c.name, c.options, c.conn, setup.logger, {
          identify: connections.length > 1,
          manual: setup.manual ?? false,
        });
        open.set(c.name, opened);
        // Before any queue is added: each worker takes it then (supervisor.addQueue).
        opened.supervisor.appTransaction = c.appTransaction;
        const same = [...open.values()].find(
          (o) => o !== opened && o.identity === opened.identity && o.options.schema === opened.options.schema,
        );
        if (same) {
          throw new PgQueueConfigError(
            `Connections "${same.name}" and "${c.name}" are the same database with the same schema "${c.options.schema}". ` +
              `Give connections.${c.name} another schema (two schemas of one database are fine), or put its queues on "${same.name}".`,
          );
        }
      }
    } catch (err) {
      for (const o of open.values()) await o.close().catch(() => undefined);
      throw err;
    }
    return new PgQueueRuntime(open, setup.ambientTransaction);
  }

  /**
   * Declares every registration of the app at once (pg-queue.providers.ts finds them all before
   * any queue is built), so a bare registerQueue({ name }) takes the options of the full one
   * whatever the order the modules are created in. Throws, naming the option, on a mismatch.
   */
  declareQueues(all: readonly RegisterQueueOptions[], asyncNames: readonly string[] = []): void {
    for (const name of asyncNames) if (!this.pending.has(name)) this.pending.set(name, deferred());
    // A bare registration of a queue registerQueueAsync configures waits for its factory (registerQueueWhenDeclared).
    const declared = all.filter((q) => !(this.pending.has(q.name) && isBareRegistration(q)));
    for (const [name, resolved] of mergeRegistrations(declared, this.options.defaultJobOptions)) {
      if (!this.byName.has(resolved.connection)) {
        throw new PgQueueConfigError(unknownConnectionMessage(name, resolved.connection, [...this.byName.keys()]));
      }
      this.registered.set(name, resolved);
      this.applyRetention(resolved);
    }
  }

  /** A queue's own retention reaches its database's store (maintenance, partition drops, completions). */
  private applyRetention(q: ResolvedQueueOptions): void {
    if (q.retention) this.byName.get(q.connection)!.store.retentions.set(q.name, q.retention);
  }

  /**
   * Registers a queue (from `registerQueue`). A full registration of a name already registered
   * must say the same (the message names the option that differs); a bare one takes its options.
   */
  registerQueue(opts: RegisterQueueOptions): Queue {
    const resolved = resolveQueueOptions(opts, this.options.defaultJobOptions);
    if (!this.byName.has(resolved.connection)) {
      throw new PgQueueConfigError(unknownConnectionMessage(resolved.name, resolved.connection, [...this.byName.keys()]));
    }
    const prev = this.registered.get(resolved.name);
    if (!prev) {
      this.registered.set(resolved.name, resolved);
      this.applyRetention(resolved);
    } else if (!isBareRegistration(opts)) sameRegistration(prev, resolved);
    else if (opts.connection !== undefined) sameRegistration(prev, { ...prev, connection: resolved.connection });
    return this.queue(resolved.name);
  }

  /**
   * Registers a queue from `registerQueueAsync`, once its factory answered: validated and
   * compared with the queue's other registrations as `registerQueue` is. A bare registration of
   * the same name waiting on it goes on then (or fails with the same error).
   */
  registerQueueAsync(opts: RegisterQueueOptions): Queue {
    const wait = this.pending.get(opts.name);
    try {
      const queue = this.registerQueue(opts);
      wait?.resolve();
      return queue;
    } catch (err) {
      wait?.reject(err as Error);
      throw err;
    }
  }

  /** `registerQueue` of a bare registration, after the async factory of the same queue (if any) answered. */
  async registerQueueWhenDeclared(opts: RegisterQueueOptions): Promise<Queue> {
    if (isBareRegistration(opts)) await this.pending.get(opts.name)?.promise;
    return this.registerQueue(opts);
  }

  /** The queue's resolved options, if it was registered. */
  queueOptions(name: string): ResolvedQueueOptions | undefined {
    return this.registered.get(name);
  }

  get registeredQueues(): ResolvedQueueOptions[] {
    return [...this.registered.values()];
  }

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
      const conn = this.connectionOf(name);
      q = new Queue(
        name,
        conn.store,
        defaults,
        this.options.maxPayloadBytes,
        (queue, job, count) => conn.supervisor.emit('enqueued', queue, job, count),
        () => conn.supervisor.listenerCount('enqueued') > 0,
        () => this.ambientTransaction(),
        this.byName.size > 1 ? (exec) => this.onDatabaseOf(conn, exec, name) : undefined,
      );
      q.attachEvents({
        events: (queue) => conn.queueEvents(queue),
        waitForJob: (queue, id, opts) => conn.waitForJob(queue, id, opts),
      });
      this.queues.set(name, q);
    }
    return q;
  }

  /**
   * `exec` (a caller's transaction), checked to be on `conn`'s database before its first
   * statement: a job written in another database's transaction would commit or roll back with
   * the wrong data, and no worker of the queue would see it. The identity is asked once per
   * manager or client object (a pg client is one session, on one database for its life; a
   * TypeORM transaction has its own EntityManager), so a reused client pays one round trip once.
   * Only when the app has more than one connection: with one, every queue is on that database.
   */
  onDatabaseOf(conn: PgQueueConnection, exec: SqlExecutor, queue: string | null): SqlExecutor {
    const key = exec.source;
    if (!key) return exec;
    let checked: Promise<void> | null = null;
    const check = (): Promise<void> =>
      (checked ??= this.identityOf(exec, key).then((identity) => {
        if (identity === conn.identity) return;
        const other = this.connections.find((c) => c.identity === identity);
        const on = `${other ? `connection "${other.name}"'s database` : 'another database'} (${dbName(identity)})`;
        throw new PgQueueConfigError(
          queue !== null
            ? `Queue "${queue}" is on connection "${conn.name}" (database ${dbName(conn.identity)}), but the manager or ` +
                `client passed (or the @Transactional() transaction) is on ${on}, so the job could not commit ` +
                'atomically with that transaction. Enqueue into a queue of that database, pass a manager or client of ' +
                `"${conn.name}"'s database, or enqueue without one (on the queue's own pool; not atomic with your transaction).`
            : `completeWith(): the job is on connection "${conn.name}" (database ${dbName(conn.identity)}), but the ` +
                `manager or client passed is on ${on}, so the completion could not commit with that transaction. ` +
                `Pass a manager or client of "${conn.name}"'s database, or complete by returning from the handler.`,
        );
      }));
    return {
      source: key,
      query: async (sql, params, name) => {
        await check();
        return exec.query(sql, params, name);
      },
    };
  }

  private identityOf(exec: SqlExecutor, key: object): Promise<string> {
    let p = this.targetIdentity.get(key);
    if (!p) {
      p = databaseIdentity(exec);
      this.targetIdentity.set(key, p);
      // A failed ask (the transaction was already aborted) is asked again next time.
      p.catch(() => this.targetIdentity.delete(key));
    }
    return p;
  }

  /** The connection whose database `exec` is on, or undefined when none is. */
  async connectionOfTarget(exec: SqlExecutor): Promise<PgQueueConnection | undefined> {
    if (this.byName.size === 1 || !exec.source) return this.byName.get(DEFAULT_CONNECTION);
    const identity = await this.identityOf(exec, exec.source);
    return this.connections.find((c) => c.identity === identity);
  }

  /** Stops the workers of every connection (gracefully, at once), then closes the pools. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.connections.map((c) => c.close()));
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

/** The database name of an identity (`system_identifier/database`), for messages. */
function dbName(identity: string): string {
  return `"${identity.slice(identity.indexOf('/') + 1)}"`;
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(err: Error): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody may wait on it (no bare registration of the queue): its failure is reported by the factory itself.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
