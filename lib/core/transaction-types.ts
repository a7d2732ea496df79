// The caller's transaction, as the queue takes it: its own file so core/steps.ts can name it
// without importing job.ts (which imports steps.ts).

/**
 * Anything that runs a SQL query inside the caller's transaction: a TypeORM `EntityManager`
 * (e.g. the one `dataSource.transaction(async (manager) => ...)` hands you) fits this shape.
 */
export interface TransactionManager {
  /** Runs one statement with `$1`-style parameters in the caller's transaction. */
  query(query: string, parameters?: unknown[]): Promise<unknown>;
}

/** A node-postgres client (`PoolClient` or `Client`) inside the caller's transaction. */
export interface TransactionClient {
  /** Runs one statement with `$1`-style parameters in the caller's transaction. */
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
