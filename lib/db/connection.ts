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

/** The connection settings of a TypeORM postgres DataSource, for the queue's own pool. */
export function fromDataSource(ds: DataSourceLike): PgPoolConfig {
  const o = ds.options as { readonly type: string } & Record<string, unknown>;
  if (o.type !== 'postgres') {
    throw new PgQueueConfigError(
      `The DataSource is of type "${o.type}"; nestjs-pg-queue needs PostgreSQL ("postgres"). ` +
        `Pass a postgres DataSource, or a connection string as "connection".`,
    );
  }
  const config: PgPoolConfig = {
    connectionString: o.url as string | undefined,
    host: o.host as string | undefined,
    port: o.port as number | undefined,
    user: o.username as string | undefined,
    password: o.password as PgPoolConfig['password'],
    database: o.database as string | undefined,
    ssl: o.ssl as PgPoolConfig['ssl'],
  };
  for (const k of Object.keys(config) as (keyof PgPoolConfig)[]) if (config[k] === undefined) delete config[k];
  return config;
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
  pool.application_name ??= name === 'default' ? 'nestjs-pg-queue' : `nestjs-pg-queue:${name}`;
  const listen: PgClientConfig =
    options.listenConnection !== undefined
      ? fromConnection(options.listenConnection)
      : { ...pool, application_name: `${pool.application_name}:listen` };
  listen.application_name ??= 'nestjs-pg-queue:listen';
  return { pool, listen };
}
