import type { Pool, PoolClient } from 'pg';
import type { TransactionClient, TransactionManager } from '../job';

/** Runs one statement and returns its rows: the one shape the store needs. */
export interface SqlExecutor {
  query<R>(sql: string, params: readonly unknown[]): Promise<R[]>;
}

/** Runs each statement on any free connection of the queue's pool (autocommit). */
export function poolExecutor(pool: Pool): SqlExecutor {
  return {
    async query<R>(sql: string, params: readonly unknown[]) {
      return (await pool.query(sql, params as unknown[])).rows as R[];
    },
  };
}

/** Runs on one pg client, in whatever transaction it has open. */
export function clientExecutor(client: TransactionClient | PoolClient): SqlExecutor {
  return {
    async query<R>(sql: string, params: readonly unknown[]) {
      return (await client.query(sql, params as unknown[])).rows as R[];
    },
  };
}

/**
 * Runs on a TypeORM EntityManager, so inside its transaction. TypeORM returns the rows of a
 * statement whose top level is SELECT or INSERT; the store sends only such statements here.
 */
export function managerExecutor(manager: TransactionManager): SqlExecutor {
  return {
    async query<R>(sql: string, params: readonly unknown[]) {
      const out = await manager.query(sql, params as unknown[]);
      if (!Array.isArray(out)) {
        throw new TypeError('EntityManager.query() did not return rows; is this a PostgreSQL DataSource?');
      }
      return out as R[];
    },
  };
}
