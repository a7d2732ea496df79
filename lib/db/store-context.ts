import { escapeIdentifier } from 'pg';
import type { PgPool, PgPoolClient } from '../core/pg-types';
import { eventsChannel, eventsLiteral } from './events-channel';
import { poolExecutor, type SqlExecutor } from './executor';
import { ForeignLockWarnings } from './lock-holders';
import { QueueRetentions, type Retention } from './queue-retention';
import { inTransaction, lockKey } from './transaction';

export type { Retention } from './queue-retention';

/** What every statement builder of a stage takes: the quoted names of one schema, and its commit clause. */
export interface SchemaSql {
  /** The schema, quoted. */
  readonly s: string;
  readonly jobs: string;
  readonly history: string;
  /** The clause that lets a hot-path write commit without waiting for the WAL flush ('' when off). */
  readonly ack: string;
  /** The events channel as a quoted literal, or null when outcomes are not published (events.ts). */
  readonly events: string | null;
}

/**
 * The names every statement of one schema is written with. The schema was validated at boot and
 * is quoted here as well; every value travels as a bind parameter.
 */
export function schemaSql(schema: string, asyncCommit = true, publishEvents = false): SchemaSql {
  const s = escapeIdentifier(schema);
  return {
    s,
    jobs: `${s}.jobs`,
    history: `${s}.job_history`,
    // Claims, outcomes and heartbeats may commit without waiting for the WAL flush: a claim of 50
    // jobs took 4.6 ms with it and about 1 ms without (bench/). Losing one in a server crash only
    // means the job runs again, which at-least-once allows; enqueues always commit durably.
    ack: asyncCommit ? `AND (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) = 'off'` : '',
    events: eventsLiteral(schema, publishEvents),
  };
}

/**
 * An enqueue on the queue's own pool commits durably whatever the server's or database's
 * `synchronous_commit` default (an app may run with it off for its own writes): this forces it on
 * for the statement's own transaction, in the same round trip (an InitPlan, evaluated once). An
 * enqueue in the caller's transaction never carries it: the caller owns that commit.
 */
export const DURABLE = `(SELECT pg_catalog.set_config('synchronous_commit', 'on', true)) = 'on'`;

/** The store's options, as the module resolved them. */
export interface StoreOptions {
  schema: string;
  retention: Retention;
  /** The span of one history partition (lib/db/history/partitions.ts). @default one day */
  historyPartitionMs?: number;
  asyncCommit: boolean;
  preparedStatements: boolean;
  /** Publish every outcome on the events channel from the statement that wrote it (events.ts). @default true */
  publishEvents?: boolean;
  /** The pool's size: how many single adds may be in flight before the next ones are coalesced. */
  poolSize?: number;
  /** Where a warning about a session of another role holding a lock of the queue goes (lock-holders.ts). @default none */
  warn?: (message: string) => void;
}

/** What every stage of the store shares: the pool, its schema's names, the channel, prepared names. */
export class StoreContext {
  readonly sql: SchemaSql;
  /** One channel per schema; the payload names the queue. */
  readonly channel: string;
  /** The channel outcomes are published on (events.ts), whether or not publishing is on. */
  readonly eventsChannel: string;
  /** The queue's own pool, one statement per connection checkout (autocommit). */
  readonly db: SqlExecutor;
  readonly retention: Retention;
  /** The module's retention and the queues' own (registerQueue({ retention })). */
  readonly retentions: QueueRetentions;
  readonly historyPartitionMs: number;
  /** Warnings, rate-limited, when a session that is not a node of this app holds a try-lock. */
  readonly foreignLocks: ForeignLockWarnings;
  private readonly prepare: boolean;
  private readonly names = new Map<string, string>();

  constructor(
    readonly pool: PgPool,
    readonly schema: string,
    opts: Omit<StoreOptions, 'schema' | 'poolSize'>,
  ) {
    this.sql = schemaSql(schema, opts.asyncCommit, opts.publishEvents ?? true);
    this.eventsChannel = eventsChannel(schema);
    // Channel names are identifiers of at most 63 bytes: the schema is at most 48, so this always fits.
    this.channel = `${schema}_jobs`;
    this.db = poolExecutor(pool);
    this.retention = opts.retention;
    this.retentions = new QueueRetentions(opts.retention);
    this.historyPartitionMs = opts.historyPartitionMs ?? 86_400_000;
    this.prepare = opts.preparedStatements;
    this.foreignLocks = new ForeignLockWarnings(opts.warn ?? (() => undefined));
  }

  /**
   * The prepared-statement name of a hot statement (undefined when preparing is off). Planning
   * the claim cost about 0.7 ms per call, as much as running it (pg_stat_statements, bench/).
   * The name is derived from the text, so one name never stands for two texts on a connection.
   */
  name(sql: string): string | undefined {
    if (!this.prepare) return undefined;
    let n = this.names.get(sql);
    if (!n) this.names.set(sql, (n = `pgq_${lockKey(sql).slice(0, 12)}`));
    return n;
  }

  /** Runs `fn` in a transaction on one connection of the queue's pool (transaction.ts). */
  transaction<T>(fn: (client: PgPoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, fn);
  }
}
