import { escapeIdentifier, escapeLiteral } from 'pg';
import { lockSql, migrationsTableSql, type Migration } from './migrator';

/**
 * The SQL `migrate` would run for `pending`, as one script to review and run by hand
 * (`nestjs-pg-queue migrate --print`): the same advisory lock, schema, version table and
 * search_path as migrator.ts's applyMigration, in one transaction. A version recorded meanwhile
 * (another node migrated) makes its INSERT fail, and the whole script rolls back.
 */
export function migrationScript(schema: string, from: number, pending: readonly Migration[]): string {
  const s = escapeIdentifier(schema);
  if (!pending.length) return `-- nestjs-pg-queue: schema ${s} is at version ${from}; no migration is pending.\n`;
  const to = pending[pending.length - 1].version;
  const out = [
    `-- nestjs-pg-queue: migration(s) ${pending.map((m) => m.version).join(', ')} for schema ${s} (version ${from} to ${to}).`,
    '-- One transaction: run it whole (psql -v ON_ERROR_STOP=1 -f this.sql).',
    'BEGIN;',
    `${lockSql().replace('$1', escapeLiteral(schema))};`,
    `CREATE SCHEMA IF NOT EXISTS ${s};`,
    `${migrationsTableSql(s)};`,
    `SET LOCAL search_path TO ${s};`,
  ];
  for (const m of pending) {
    out.push(
      '',
      `-- ${String(m.version).padStart(4, '0')}_${m.name}`,
      m.sql.trim(),
      `INSERT INTO ${s}.migrations (version, name) VALUES (${m.version}, ${escapeLiteral(m.name)});`,
    );
  }
  out.push('', 'COMMIT;', '');
  return out.join('\n');
}

/**
 * The name of migration `version`'s TypeORM class for `schema`: TypeORM orders migrations by the
 * timestamp at the end of the name, and records them by name, so the classes of
 * pgQueueMigrations() and the files `migrate --typeorm` writes are the same migrations to it.
 */
export function typeormMigrationName(version: number, schema: string): string {
  return `PgQueue${version.toString().padStart(4, '0')}${schema.replace(/_/g, '')}${typeormTimestamp(version)}`;
}

/** The timestamp TypeORM orders migration `version` by. */
export function typeormTimestamp(version: number): number {
  return 1700000000000 + version;
}
