import { escapeIdentifier } from 'pg';

/**
 * The statements of nestjs-pg-queue/testing's test databases (created and dropped on the test
 * server, never on an app's database). Names are quoted here; values travel as bind parameters.
 */
export const testDatabaseSql = {
  create: (name: string) => `CREATE DATABASE ${escapeIdentifier(name)}`,
  /** WITH (FORCE): the connections an app left open do not stop it (PostgreSQL 13+). */
  drop: (name: string) => `DROP DATABASE IF EXISTS ${escapeIdentifier(name)} WITH (FORCE)`,
  /** $1 prefix */
  namesWithPrefix: 'SELECT datname FROM pg_database WHERE pg_catalog.left(datname, pg_catalog.length($1)) = $1',
} as const;
