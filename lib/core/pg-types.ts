import type { Duplex } from 'node:stream';
import type { ConnectionOptions } from 'node:tls';

// The node-postgres shapes this package's public types mention, declared here so an app compiles
// without @types/pg (pg ships no types of its own). Each mirrors @types/pg 8.x field by field, so
// a real pg.PoolConfig, Pool or PoolClient fits: scripts/check-package.mjs compiles a consumer
// that passes them, and one without @types/pg. Callbacks are declared as methods, whose
// parameters TypeScript compares both ways, so pg's own callback types fit them too.

/** The connection settings of node-postgres: `pg`'s `ClientConfig`. */
export interface PgClientConfig {
  /** The role to log in as. @default `PGUSER`, else the OS user */
  user?: string | undefined;
  /** The database. @default `PGDATABASE`, else `user` */
  database?: string | undefined;
  /** The password, or a function pg calls at each connect (a rotating token, e.g. IAM auth). @default `PGPASSWORD` */
  password?: string | (() => string | Promise<string>) | undefined;
  /** @default `PGPORT`, else 5432 */
  port?: number | undefined;
  /** A host name, an IP address, or a Unix socket directory. @default `PGHOST`, else localhost */
  host?: string | undefined;
  /** A URL (`postgres://user:password@host:5432/db?sslmode=require`); its parts fill the fields not given. */
  connectionString?: string | undefined;
  /** Turn on TCP keepalive on the socket. @default false */
  keepAlive?: boolean | undefined;
  /** Connect through this socket instead of opening one (a custom transport). */
  stream?: () => Duplex | undefined;
  /** The server's `statement_timeout` for the session, in ms. @default the server's setting */
  statement_timeout?: false | number | undefined;
  /** TLS: true, or Node's `tls.connect` options (`ca`, `rejectUnauthorized`...). @default false (or what `connectionString`'s `sslmode` says) */
  ssl?: boolean | ConnectionOptions | undefined;
  /** Use SCRAM-SHA-256-PLUS channel binding over TLS, where the server offers it. @default false */
  enableChannelBinding?: boolean | undefined;
  /** `direct`: start TLS at once, without PostgreSQL's SSLRequest round trip (PostgreSQL 17+). @default 'postgres' */
  sslnegotiation?: 'postgres' | 'direct' | undefined;
  /** How long a query may take, in ms, timed by the client (the server is not told). @default no limit */
  query_timeout?: number | undefined;
  /** The server's `lock_timeout` for the session, in ms. @default the server's setting */
  lock_timeout?: number | undefined;
  /** Idle time before the first TCP keepalive probe, with `keepAlive`. @default 0 (the OS's) */
  keepAliveInitialDelayMillis?: number | undefined;
  /** The server's `idle_in_transaction_session_timeout` for the session, in ms. @default the server's setting */
  idle_in_transaction_session_timeout?: number | undefined;
  /** `application_name`, as `pg_stat_activity` shows it. @default 'nestjs-pg-queue' for the queue's own connections */
  application_name?: string | undefined;
  /** `application_name` when none is given otherwise. */
  fallback_application_name?: string | undefined;
  /** How long opening a connection may take, in ms. @default the module's `connectTimeoutMs`, for the queue's pool */
  connectionTimeoutMillis?: number | undefined;
  /** Custom type parsers (`pg.types`, or pg-types): the parser of a type's oid, per format. */
  types?: { getTypeParser(oid: number, format?: 'text' | 'binary'): unknown } | undefined;
  /** Command-line options sent at startup, e.g. `'-c search_path=app'` (PgBouncer drops them). */
  options?: string | undefined;
  /** The session's `client_encoding`. */
  client_encoding?: string | undefined;
  /** Send each query without waiting for the previous one's result (pg's pipelining). @default false */
  pipeline?: boolean | undefined;
}

/** The pool settings of node-postgres: `pg`'s `PoolConfig` (pg-pool's options on top of a client's). */
export interface PgPoolConfig extends PgClientConfig {
  /** Ignored by the queue: its pool's size is `poolSize`. */
  max?: number | undefined;
  /** Idle connections the pool keeps rather than close after `idleTimeoutMillis`. @default 0 */
  min?: number | undefined;
  /** How long a connection may sit idle in the pool before it is closed, in ms; 0 or null: never. @default 10_000 */
  idleTimeoutMillis?: number | undefined | null;
  /** Receives pg-pool's debug messages. */
  log?(...messages: unknown[]): void;
  /** The Promise implementation pg-pool returns. @default the global Promise */
  Promise?: PromiseConstructorLike | undefined;
  /** Let the process exit while the pool holds only idle connections. @default false */
  allowExitOnIdle?: boolean | undefined;
  /** Close a connection after this many checkouts (spreads load after a failover). @default Infinity */
  maxUses?: number | undefined;
  /** Close a connection this many seconds after it opened, once it is idle; 0: never. @default 0 */
  maxLifetimeSeconds?: number | undefined;
  /** The client class the pool creates (pg's `Client` by default). */
  Client?: (new () => PgQueryable) | undefined;
  /** Called with each new connection before the pool hands it out (session setup). */
  onConnect?(client: PgQueryable): void;
  /** Checks each new connection before use; an error passed to `done` discards it. */
  verify?(client: PgQueryable, done: (err?: Error) => void): void;
}

/** A statement with its parameters; `name` prepares it once per connection. */
export interface PgQueryConfig {
  name?: string | undefined;
  text: string;
  values?: unknown[] | undefined;
  /** 'array': each row as an array of its values, in the statement's column order. */
  rowMode?: 'array' | undefined;
}

/** What a query resolves to, as far as this package reads it. */
export interface PgQueryResult<R> {
  rows: R[];
  rowCount: number | null;
  /** The result's columns, in order. */
  fields?: readonly { readonly name: string }[];
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
