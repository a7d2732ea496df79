import { escapeIdentifier, type Pool } from 'pg';
import { PgQueueError } from '../core/errors';
import { clientExecutor, type SqlExecutor } from './executor';
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

/** A stable 64-bit advisory lock key per schema, so two apps with two schemas never wait on each other. */
function lockSql(): string {
  return `SELECT pg_advisory_xact_lock(('x' || substr(md5('nestjs-pg-queue:migrate:' || $1), 1, 15))::bit(60)::bigint)`;
}

/**
 * Applies one migration inside the caller's open transaction (TypeORM migrations use this):
 * sets the search path to the schema for the transaction only, runs the SQL, records the version.
 * Does nothing when the version is already recorded.
 */
export async function applyMigration(db: SqlExecutor, schema: string, m: Migration): Promise<boolean> {
  const s = escapeIdentifier(schema);
  await db.query(lockSql(), [schema]);
  await db.query(`CREATE SCHEMA IF NOT EXISTS ${s}`, []);
  await db.query(
    `CREATE TABLE IF NOT EXISTS ${s}.migrations (version integer PRIMARY KEY, name text NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now())`,
    [],
  );
  const done = await db.query<{ version: number }>(`SELECT version FROM ${s}.migrations WHERE version = $1`, [m.version]);
  if (done.length) return false;
  // The SQL files name no schema: point search_path at ours for the step, then put the caller's
  // back, since a TypeORM migration run goes on in this transaction with unqualified names.
  const [{ path }] = await db.query<{ path: string }>(`SELECT current_setting('search_path') AS path`, []);
  await db.query(`SELECT set_config('search_path', $1, true)`, [s]);
  await db.query(m.sql, []);
  await db.query(`SELECT set_config('search_path', $1, true)`, [path]);
  await db.query(`INSERT INTO ${s}.migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
  return true;
}

/**
 * Applies every pending migration in one transaction under an advisory lock, so any number of
 * nodes booting at once apply each step exactly once. Returns the versions it applied.
 */
export async function migrate(pool: Pool, schema: string): Promise<number[]> {
  return inTransaction(
    pool,
    async (client) => {
      const db = clientExecutor(client);
      const applied: number[] = [];
      for (const m of loadMigrations()) {
        if (await applyMigration(db, schema, m)) applied.push(m.version);
      }
      return applied;
    },
    (err) => new PgQueueError(`Migrating schema "${schema}" failed: ${(err as Error).message}`, { cause: err }),
  );
}

/** The schema version recorded in the database (0 when the schema does not exist). */
export async function currentVersion(pool: Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ exists: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS exists`, [
    `${escapeIdentifier(schema)}.migrations`,
  ]);
  if (!rows[0].exists) return 0;
  const v = await pool.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${escapeIdentifier(schema)}.migrations`);
  return v.rows[0].v ?? 0;
}
