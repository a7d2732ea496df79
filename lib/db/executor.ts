import { PgQueueConfigError } from '../core/errors';
import type { TransactionClient, TransactionManager } from '../core/job';
import type { PgPool, PgPoolClient, PgQueryable } from '../core/pg-types';

/**
 * Runs one statement and returns its rows: the one shape the store needs. With `name`, the
 * statement is prepared once per connection under that name (where the executor can).
 */
export interface SqlExecutor {
  query<R>(sql: string, params: readonly unknown[], name?: string): Promise<R[]>;
  /**
   * The caller's manager or client this executor runs on (absent for the queue's pool): what
   * the check that a transaction is on the queue's database remembers its answer by.
   */
  readonly source?: object;
}

async function run<R>(target: PgQueryable, sql: string, params: readonly unknown[], name?: string): Promise<R[]> {
  const config = name ? { name, text: sql, values: params as unknown[] } : { text: sql, values: params as unknown[] };
  return (await target.query<R>(config)).rows;
}

/** Runs each statement on any free connection of the queue's pool (autocommit). */
export function poolExecutor(pool: PgPool): SqlExecutor {
  return { query: (sql, params, name) => run(pool, sql, params, name) };
}

/** Runs on one pg client, in whatever transaction it has open. */
export function clientExecutor(client: TransactionClient | PgPoolClient): SqlExecutor {
  return { query: (sql, params, name) => run(client as PgQueryable, sql, params, name), source: client };
}

/**
 * Runs on a TypeORM EntityManager, so inside its transaction. TypeORM returns the rows of a
 * statement whose top level is SELECT or INSERT; the store sends only such statements here.
 */
export function managerExecutor(manager: TransactionManager): SqlExecutor {
  return {
    source: manager,
    // TypeORM has no named statements: `name` is ignored here.
    async query<R>(sql: string, params: readonly unknown[]) {
      const out = await manager.query(sql, params as unknown[]);
      if (!Array.isArray(out)) {
        throw new TypeError('EntityManager.query() did not return rows; is this a PostgreSQL DataSource?');
      }
      return out as R[];
    },
  };
}

/** Where the insert runs: the queue's pool by default, or the caller's transaction. */
export interface TransactionTarget {
  readonly manager?: TransactionManager;
  readonly client?: TransactionClient;
}

/** The caller's transaction as an executor, or undefined for the queue's pool. */
export function executorFor(t: TransactionTarget | undefined): SqlExecutor | undefined {
  if (t?.manager && t.client) throw new PgQueueConfigError('Pass either manager or client, not both.');
  if (t?.manager) return managerExecutor(t.manager);
  if (t?.client) return clientExecutor(t.client);
  return undefined;
}
