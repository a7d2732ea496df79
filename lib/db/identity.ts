import type { SqlExecutor } from './executor';

/**
 * Which database a session is on: its name, and the server's `system_identifier` (chosen at
 * initdb, kept across restarts, different for every cluster; PgBouncer passes the query to the
 * server, so a pooled session says the same as a direct one). pg_control_system() is executable
 * by PUBLIC (checked as a plain LOGIN role on PostgreSQL 15 and 17): no superuser needed. Two
 * databases of one server differ by name; two servers by identifier, even with equal names,
 * addresses seen through a proxy, or ports.
 */
const IDENTITY_SQL =
  'SELECT current_database() AS db, (SELECT system_identifier::text FROM pg_catalog.pg_control_system()) AS server';

/** The identity of the database `exec` runs on, as `server/database`. */
export async function databaseIdentity(exec: SqlExecutor): Promise<string> {
  const [row] = await exec.query<{ db: string; server: string }>(IDENTITY_SQL, []);
  return `${row.server}/${row.db}`;
}
