import type { Duplex } from 'node:stream';
import type { ConnectionOptions } from 'node:tls';

// The node-postgres shapes this package's public types mention, declared here so an app compiles
// without @types/pg (pg ships no types of its own). Each mirrors @types/pg 8.x field by field, so
// a real pg.PoolConfig, Pool or PoolClient fits: scripts/check-package.mjs compiles a consumer
// that passes them, and one without @types/pg. Callbacks are declared as methods, whose
// parameters TypeScript compares both ways, so pg's own callback types fit them too.

/** The connection settings of node-postgres: `pg`'s `ClientConfig`. */
export interface PgClientConfig {
  user?: string | undefined;
  database?: string | undefined;
  password?: string | (() => string | Promise<string>) | undefined;
  port?: number | undefined;
  host?: string | undefined;
  connectionString?: string | undefined;
  keepAlive?: boolean | undefined;
  stream?: () => Duplex | undefined;
  statement_timeout?: false | number | undefined;
  ssl?: boolean | ConnectionOptions | undefined;
  enableChannelBinding?: boolean | undefined;
  sslnegotiation?: 'postgres' | 'direct' | undefined;
  query_timeout?: number | undefined;
  lock_timeout?: number | undefined;
  keepAliveInitialDelayMillis?: number | undefined;
  idle_in_transaction_session_timeout?: number | undefined;
  application_name?: string | undefined;
  fallback_application_name?: string | undefined;
  connectionTimeoutMillis?: number | undefined;
  /** Custom type parsers (`pg.types`, or pg-types): the parser of a type's oid, per format. */
  types?: { getTypeParser(oid: number, format?: 'text' | 'binary'): unknown } | undefined;
  options?: string | undefined;
  client_encoding?: string | undefined;
  pipeline?: boolean | undefined;
}

/** The pool settings of node-postgres: `pg`'s `PoolConfig` (pg-pool's options on top of a client's). */
export interface PgPoolConfig extends PgClientConfig {
  max?: number | undefined;
  min?: number | undefined;
  idleTimeoutMillis?: number | undefined | null;
  log?(...messages: unknown[]): void;
  Promise?: PromiseConstructorLike | undefined;
  allowExitOnIdle?: boolean | undefined;
  maxUses?: number | undefined;
  maxLifetimeSeconds?: number | undefined;
  /** The client class the pool creates (pg's `Client` by default). */
  Client?: (new () => PgQueryable) | undefined;
  onConnect?(client: PgQueryable): void;
  verify?(client: PgQueryable, done: (err?: Error) => void): void;
}

/** A statement with its parameters; `name` prepares it once per connection. */
export interface PgQueryConfig {
  name?: string | undefined;
  text: string;
  values?: unknown[] | undefined;
}

/** What a query resolves to, as far as this package reads it. */
export interface PgQueryResult<R> {
  rows: R[];
  rowCount: number | null;
}

/** Anything that runs a query: a pg `Pool`, `PoolClient` or `Client`. */
export interface PgQueryable {
  /** Column types are the caller's to state: `query<{ n: number }>(...)`. */
  query<R = Record<string, unknown>>(queryTextOrConfig: string | PgQueryConfig, values?: unknown[]): Promise<PgQueryResult<R>>;
}

/** A client checked out of a pg `Pool`. */
export interface PgPoolClient extends PgQueryable {
  release(err?: Error | boolean): void;
  on(event: 'error', listener: (err: Error) => void): unknown;
  off(event: 'error', listener: (err: Error) => void): unknown;
}

/** A node-postgres `Pool`: the queue's own. */
export interface PgPool extends PgQueryable {
  connect(): Promise<PgPoolClient>;
  end(): Promise<void>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}
