import { PgQueueConfigError } from './errors';
import { quote } from './input-text';
import { validateConnectionName } from './names';
import type { PgQueueConnectionOptions, PgQueueModuleOptions } from './options/types';
import type { ResolvedPgQueueOptions } from './options/resolved';
import { resolveModuleOptions } from './options/module-checks';
import { refuseUnknownKeys } from './options/unknown-keys';

/** The connection of a queue registered without `connection`. */
export const DEFAULT_CONNECTION = 'default';

const CONNECTION_KEYS = [
  'dataSource',
  'connection',
  'listenConnection',
  'schema',
  'migrate',
  'listen',
  'poolSize',
  'connectTimeoutMs',
  'preparedStatements',
] as const;
/** Where a database is: given per connection, never inherited from the top level by another one. */
const WHERE_KEYS = ['dataSource', 'connection', 'listenConnection'] as const;

/** One database the runtime opens: its name, its options as given (merged), and resolved. */
export interface ConnectionPlan {
  readonly name: string;
  /** The top-level options with this connection's fields over them: what `resolveConnection` reads. */
  readonly raw: PgQueueModuleOptions;
  readonly options: ResolvedPgQueueOptions;
}

/**
 * Validates `forRoot`'s options, and splits them into one plan per database: `default` first
 * (the top-level `connection`/`dataSource`, or `connections.default`), then the other entries of
 * `connections` in the order given. Throws, saying what to change, on an unknown key, a bad name,
 * a `default` given twice, or a named connection that does not say where its database is.
 */
export function planConnections(o: PgQueueModuleOptions): ConnectionPlan[] {
  const base = resolveModuleOptions(o);
  const named = o.connections;
  if (named === undefined) return [{ name: DEFAULT_CONNECTION, raw: o, options: base }];
  if (typeof named !== 'object' || named === null || Array.isArray(named)) {
    throw new PgQueueConfigError(
      `Invalid connections: ${quote(named)}. Use an object of named databases, for example ` +
        "connections: { bulk: { connection: 'postgres://...' } }.",
    );
  }
  const top: Record<string, unknown> = { ...o };
  for (const k of [...WHERE_KEYS, 'connections']) delete top[k];
  const plans: ConnectionPlan[] = [];
  const given = named.default;
  if (given !== undefined) {
    const twice = WHERE_KEYS.filter((k) => o[k] !== undefined);
    if (twice.length) {
      throw new PgQueueConfigError(
        `The default database is given twice: as connections.default and as the top-level ${twice.join(', ')}. ` +
          'Keep one: move the top-level one into connections.default, or remove connections.default.',
      );
    }
  }
  for (const [name, entry] of Object.entries({ [DEFAULT_CONNECTION]: given, ...named })) {
    validateConnectionName(name, 'connections key');
    if (name === DEFAULT_CONNECTION && entry === undefined) {
      plans.push({ name, raw: o, options: base });
      continue;
    }
    if (typeof entry !== 'object' || entry === null) {
      throw new PgQueueConfigError(
        `Invalid connections.${name}: ${quote(entry)}. Use an object like { connection: 'postgres://...' }.`,
      );
    }
    refuseUnknownKeys(`connections.${name}`, entry, CONNECTION_KEYS);
    if (name !== DEFAULT_CONNECTION && entry.connection === undefined && entry.dataSource === undefined) {
      throw new PgQueueConfigError(
        `connections.${name} does not say where its database is: give it connection (a connection string or pg ` +
          'PoolConfig) or dataSource (a TypeORM DataSource or its token). Only the default falls back to the ' +
          "app's default DataSource.",
      );
    }
    const raw = { ...top, ...defined(entry) } as PgQueueModuleOptions;
    const options = resolveModuleOptions(raw);
    // One catcher of unhandled rejections per process, the default connection's: with one per
    // database, each rejection would be logged once per connection.
    plans.push({ name, raw, options: name === DEFAULT_CONNECTION ? options : { ...options, handleUnhandledRejections: false } });
  }
  return plans;
}

/** `entry` without its undefined fields, so they do not hide the top-level ones. */
function defined(entry: PgQueueConnectionOptions): Partial<PgQueueConnectionOptions> {
  return Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== undefined));
}

/**
 * The message for a queue registered on a connection that `forRoot` does not declare.
 * @param connections the declared connection names
 */
export function unknownConnectionMessage(queue: string, connection: string, connections: readonly string[]): string {
  return (
    `registerQueue({ name: '${queue}', connection: '${connection}' }): no connection "${connection}" is declared. ` +
    `Add connections: { ${connection}: { connection: '...' } } to PgQueueModule.forRoot(), or use one of: ` +
    `${connections.map((c) => `"${c}"`).join(', ')}.`
  );
}
