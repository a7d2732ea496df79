import { Client, type ClientConfig, type PoolConfig } from 'pg';
import type { PgClientConfig, PgPoolConfig } from '../core/pg-types';
import { PgQueueConfigError } from '../core/errors';
import type { DataSourceLike, PgQueueModuleOptions } from '../core/options/types';

/** True for an object shaped like a TypeORM DataSource (as opposed to a DI token). */
export function isDataSourceLike(x: unknown): x is DataSourceLike {
  return (
    typeof x === 'object' &&
    x !== null &&
    typeof (x as DataSourceLike).options === 'object' &&
    'type' in (x as DataSourceLike).options
  );
}

function fromConnection(c: string | PgPoolConfig): PgPoolConfig {
  if (typeof c === 'string') return { connectionString: c };
  if (typeof c === 'object' && c !== null) return { ...c };
  throw new PgQueueConfigError('connection must be a connection string or a pg PoolConfig object.');
}

/**
 * The connection settings of a TypeORM postgres DataSource, for the queue's own pool: exactly what
 * TypeORM's PostgresDriver.createPool (typeorm 0.3) gives pg. The credentials are the top level's,
 * or `replication.master`'s (the queue writes, so never a replica's); then `connectTimeoutMS`,
 * `applicationName` (top level, else the credentials'), and `extra` over all of them (pg gets
 * `extra.ssl`, `extra.options`, keepAlive, statement_timeout... as TypeORM passes them). Only the
 * pool's size is the queue's own (poolSize). A custom `driver` cannot be carried over: refused.
 */
export function fromDataSource(ds: DataSourceLike): PgPoolConfig {
  const o = ds.options as { readonly type: string } & Record<string, unknown>;
  if (o.type !== 'postgres') {
    throw new PgQueueConfigError(
      `The DataSource is of type "${o.type}"; nestjs-pg-queue needs PostgreSQL ("postgres"). ` +
        `Pass a postgres DataSource, or a connection string as "connection".`,
    );
  }
  if (o.driver !== undefined && o.driver !== null && (o.driver as { Client?: unknown }).Client !== Client) {
    throw new PgQueueConfigError(
      "The DataSource sets `driver` (its own pg module), which the queue's pool cannot use: it connects with the " +
        "'pg' package. Pass the queue a connection of its own: forRoot({ connection: 'postgres://...' }) or a pg PoolConfig.",
    );
  }
  const replication = o.replication as { master?: unknown } | undefined;
  if (replication !== undefined && (typeof replication.master !== 'object' || replication.master === null)) {
    throw new PgQueueConfigError(
      'The DataSource has `replication` without a `master`: the queue writes, so it needs the primary. Give ' +
        'replication.master, or pass the queue its own connection: forRoot({ connection: ... }).',
    );
  }
  const c = (replication ? replication.master : o) as Record<string, unknown>;
  const extra = o.extra;
  if (extra !== undefined && (typeof extra !== 'object' || extra === null)) {
    throw new PgQueueConfigError(`The DataSource's extra is ${typeof extra}; TypeORM passes it to pg as an object.`);
  }
  const config = {
    connectionString: c.url,
    host: c.host,
    user: c.username,
    password: c.password,
    database: c.database,
    port: c.port,
    ssl: c.ssl,
    connectionTimeoutMillis: o.connectTimeoutMS,
    application_name: o.applicationName ?? c.applicationName,
    ...(extra as Record<string, unknown> | undefined),
  } as Record<string, unknown>;
  // The app's pool size is the app's: the queue's pool has its own (poolSize).
  delete config.max;
  for (const k of Object.keys(config)) if (config[k] === undefined) delete config[k];
  return config as PgPoolConfig;
}

/**
 * The pool and listener settings from the module options: `connection` first, then the given
 * DataSource, then the app's default DataSource. Throws a message that says what to pass.
 */
export function resolveConnection(
  options: PgQueueModuleOptions,
  dataSource: DataSourceLike | undefined,
  name = 'default',
): { pool: PgPoolConfig; listen: PgClientConfig } {
  let pool: PgPoolConfig;
  if (options.connection !== undefined) pool = fromConnection(options.connection);
  else if (dataSource) pool = fromDataSource(dataSource);
  else {
    throw new PgQueueConfigError(
      'PgQueueModule has no database connection. Pass `connection` (a connection string or pg PoolConfig), ' +
        'or `dataSource` (a TypeORM DataSource or its token), or import TypeOrmModule.forRoot() so the ' +
        "app's default DataSource can be used.",
    );
  }
  // A named connection says its name in pg_stat_activity, so its sessions can be told apart.
  const ours = name === 'default' ? 'nestjs-pg-queue' : `nestjs-pg-queue:${name}`;
  // A DataSource's applicationName names the app's own pool: the queue's sessions keep it as a
  // prefix, so they show whose they are and stay told apart from the app's.
  if (options.connection === undefined && pool.application_name) pool.application_name += `:${ours}`;
  pool.application_name ??= ours;
  const listen: PgClientConfig =
    options.listenConnection !== undefined
      ? fromConnection(options.listenConnection)
      : { ...pool, application_name: `${pool.application_name}:listen` };
  listen.application_name ??= 'nestjs-pg-queue:listen';
  return { pool, listen };
}

/**
 * What the queue's pg Pool is built with: the resolved settings, the queue's pool size, and a
 * connect timeout (`connectTimeoutMs`) where the settings set none. The timeout is given to each
 * client, not to the pool: pg's pool-level connectionTimeoutMillis would also fail a query that
 * waits that long for a free connection of a busy pool, which is only slow, not broken.
 */
export function queuePoolConfig(pool: PgPoolConfig, o: { poolSize: number; connectTimeoutMs: number }): PoolConfig {
  const config: PoolConfig = { ...pool, Client: pool.Client as PoolConfig['Client'], max: o.poolSize };
  if (pool.connectionTimeoutMillis !== undefined) return config;
  const Base = (config.Client ?? Client) as typeof Client;
  const ms = o.connectTimeoutMs;
  config.Client = class extends Base {
    constructor(c?: string | ClientConfig) {
      super(typeof c === 'string' ? { connectionString: c, connectionTimeoutMillis: ms } : withTimeout(c, ms));
    }
  };
  return config;
}

/**
 * A client's settings with the connect timeout. pg-pool hands each client its options with the
 * password defined non-enumerable (so it never shows in a log), which a spread leaves out: copied
 * by name, or every server that asks for a password refuses the queue's connections.
 */
function withTimeout(c: ClientConfig | undefined, ms: number): ClientConfig {
  const out: ClientConfig = { ...c, connectionTimeoutMillis: ms };
  if (c?.password !== undefined) out.password = c.password;
  return out;
}

/** The LISTEN connection's settings, with the connect timeout where they set none. */
export function listenClientConfig(listen: PgClientConfig, connectTimeoutMs: number): PgClientConfig {
  return { ...listen, connectionTimeoutMillis: listen.connectionTimeoutMillis ?? connectTimeoutMs };
}
