import { escapeIdentifier, type Pool } from 'pg';
import { PgQueueError } from '../core/errors';
import { clientExecutor, poolExecutor, type SqlExecutor } from './executor';
import { advisoryLockHolders, describeHolders, migrationLockKey } from './lock-holders';
import { MIGRATIONS } from './migrations.generated';
import { inTransaction } from './transaction';

/** One numbered, forward-only migration from `migrations/NNNN_name.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** The numbered migrations, embedded at build time from `migrations/*.sql`. */
export function loadMigrations(): readonly Migration[] {
  return MIGRATIONS;
}

/** The newest schema version this build of the library needs. */
export function latestVersion(): number {
  const list = loadMigrations();
  return list.length ? list[list.length - 1].version : 0;
}

/** A stable 64-bit advisory lock key per schema, so two apps with two schemas never wait on each other. $1 schema */
export function lockSql(): string {
  return `SELECT pg_catalog.pg_advisory_xact_lock(('x' || pg_catalog.substr(pg_catalog.md5('nestjs-pg-queue:migrate:' || $1), 1, 15))::bit(60)::bigint)`;
}

/**
 * How long a boot waits for the migration lock. Any role that can connect can take an advisory
 * lock, so a session of another role holding this key (by accident or not) hung every boot for
 * as long as it held it. Another node's migration holds it for well under a second on an empty
 * schema, and for the length of its DDL otherwise (migration 10 on a large history: catalog-only,
 * milliseconds), so a minute is generous: past it the boot fails and names the holder.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 60_000;

/** The migration lock was not had within the timeout (a lock_timeout, 55P03, on the lock statement itself). */
class MigrationLockTimeout extends Error {}

/**
 * Takes the migration lock, waiting at most `timeoutMs`, then puts the transaction's previous
 * lock_timeout back: the migration's own DDL may wait on the queue's tables as long as it did.
 */
async function takeMigrationLock(db: SqlExecutor, schema: string, timeoutMs: number): Promise<void> {
  const [{ prev }] = await db.query<{ prev: string }>(
    `SELECT pg_catalog.current_setting('lock_timeout') AS prev, pg_catalog.set_config('lock_timeout', $1, true)`,
    [`${timeoutMs}ms`],
  );
  try {
    await db.query(lockSql(), [schema]);
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') throw new MigrationLockTimeout('migration lock timeout', { cause: err });
    throw err;
  }
  await db.query(`SELECT pg_catalog.set_config('lock_timeout', $1, true)`, [prev]);
}

/** takeMigrationLock, its timeout told as a PgQueueError (which `migrate` then completes with the holder). */
async function lockForMigrate(db: SqlExecutor, schema: string, lockTimeoutMs: number): Promise<void> {
  try {
    await takeMigrationLock(db, schema, lockTimeoutMs);
  } catch (err) {
    // In the caller's transaction (TypeORM), which the timeout aborted: no query can name the holder here.
    if (err instanceof MigrationLockTimeout) {
      throw new PgQueueError(lockTimeoutMessage(schema, lockTimeoutMs, 'another session (see pg_locks)'), { cause: err });
    }
    throw err;
  }
}

function lockTimeoutMessage(schema: string, timeoutMs: number, holders: string): string {
  return (
    `Migrating schema "${schema}": the migration lock was not had within ${timeoutMs} ms; it is held by ${holders}. ` +
    'Another node migrating holds it for seconds at most: end that session (SELECT pg_catalog.pg_terminate_backend(pid)) ' +
    "if it is not one of this app's nodes, then boot again (docs/security.md)."
  );
}

/** The table of applied versions, created by the first migration run. `s` the quoted schema */
export function migrationsTableSql(s: string): string {
  return `CREATE TABLE IF NOT EXISTS ${s}.migrations (version integer PRIMARY KEY, name text NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now())`;
}

/**
 * Applies one migration inside the caller's open transaction (TypeORM migrations use this):
 * sets the search path to the schema for the transaction only, runs the SQL, records the version.
 * Does nothing when the version is already recorded.
 */
export async function applyMigration(
  db: SqlExecutor,
  schema: string,
  m: Migration,
  lockTimeoutMs = MIGRATION_LOCK_TIMEOUT_MS,
): Promise<boolean> {
  const s = escapeIdentifier(schema);
  await lockForMigrate(db, schema, lockTimeoutMs);
  await db.query(`CREATE SCHEMA IF NOT EXISTS ${s}`, []);
  await db.query(migrationsTableSql(s), []);
  const done = await db.query<{ version: number }>(`SELECT version FROM ${s}.migrations WHERE version = $1`, [m.version]);
  if (done.length) return false;
  // The SQL files name no schema: point search_path at ours for the step, then put the caller's
  // back, since a TypeORM migration run goes on in this transaction with unqualified names.
  const [{ path }] = await db.query<{ path: string }>(`SELECT pg_catalog.current_setting('search_path') AS path`, []);
  await db.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [s]);
  await db.query(m.sql, []);
  await db.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [path]);
  await db.query(`INSERT INTO ${s}.migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
  return true;
}

/**
 * Applies every pending migration in one transaction under an advisory lock, so any number of
 * nodes booting at once apply each step exactly once. Returns the versions it applied. Waits at
 * most `lockTimeoutMs` for the lock, then fails naming the session that holds it.
 */
export async function migrate(pool: Pool, schema: string, lockTimeoutMs = MIGRATION_LOCK_TIMEOUT_MS): Promise<number[]> {
  try {
    return await inTransaction(pool, async (client) => {
      const db = clientExecutor(client);
      // One look at the versions applied, under the lock, then only the missing steps: checking
      // each step on its own (applyMigration) cost 6 round trips per migration, 114 for 19, on
      // every boot of an up-to-date schema: 30-40 ms of a worker's time to its first job on a
      // loaded 2-core machine (bench/, first-job workload, issue 30).
      await lockForMigrate(db, schema, lockTimeoutMs);
      const s = escapeIdentifier(schema);
      await db.query(`CREATE SCHEMA IF NOT EXISTS ${s}`, []);
      await db.query(migrationsTableSql(s), []);
      const done = new Set(
        (await db.query<{ version: number }>(`SELECT version FROM ${s}.migrations`, [])).map((r) => r.version),
      );
      const applied: number[] = [];
      for (const m of loadMigrations()) {
        if (done.has(m.version)) continue;
        if (await applyMigration(db, schema, m, lockTimeoutMs)) applied.push(m.version);
      }
      return applied;
    });
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    if (err instanceof PgQueueError && cause instanceof MigrationLockTimeout) {
      // The transaction is over: another connection asks who holds the lock now.
      const holders = await advisoryLockHolders(poolExecutor(pool), migrationLockKey(schema)).catch(() => []);
      throw new PgQueueError(lockTimeoutMessage(schema, lockTimeoutMs, describeHolders(holders)), { cause: err });
    }
    throw new PgQueueError(`Migrating schema "${schema}" failed: ${(err as Error).message}`, { cause: err });
  }
}

/** The schema version recorded in the database (0 when the schema does not exist). */
export async function currentVersion(pool: Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ exists: boolean }>(`SELECT pg_catalog.to_regclass($1) IS NOT NULL AS exists`, [
    `${escapeIdentifier(schema)}.migrations`,
  ]);
  if (!rows[0].exists) return 0;
  const v = await pool.query<{ v: number | null }>(
    `SELECT pg_catalog.max(version) AS v FROM ${escapeIdentifier(schema)}.migrations`,
  );
  return v.rows[0].v ?? 0;
}
