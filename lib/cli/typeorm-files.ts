import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadMigrations, type Migration } from '../db/migrator';
import { typeormMigrationName, typeormTimestamp } from '../db/migration-script';

/**
 * The TypeORM migration file of one of our migrations. It runs the library's own step for that
 * version (pgQueueMigrations(): the migration lock, the version record in the schema's own
 * table), so a schema migrated by these files, by `migrate: true` or by `nestjs-pg-queue migrate`
 * is the same schema, and each path skips what another applied. Its class name is the one
 * pgQueueMigrations() gives, so TypeORM sees one migration whichever way it was registered.
 */
export function typeormMigrationFile(m: Migration, schema: string): string {
  const name = typeormMigrationName(m.version, schema);
  const label = `${String(m.version).padStart(4, '0')}_${m.name}`;
  return `// nestjs-pg-queue migration ${label} for schema "${schema}", written by \`nestjs-pg-queue migrate --typeorm\`.
// It runs the library's own step for this version (the same lock and version record as migrate: true);
// the SQL is migrations/${label}.sql of the installed nestjs-pg-queue. Forward-only: down() throws.
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { pgQueueMigrations } from 'nestjs-pg-queue';

const Step = pgQueueMigrations({ schema: '${schema}' }).find((m) => m.name === '${name}');

export class ${name} implements MigrationInterface {
  name = '${name}';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (!Step) throw new Error('${name}: the installed nestjs-pg-queue has no migration ${m.version}; it is older than this file.');
    await new Step().up(queryRunner);
  }

  async down(): Promise<void> {
    throw new Error('nestjs-pg-queue migrations are forward-only; ${name} cannot be reverted.');
  }
}
`;
}

/** The file name TypeORM's CLI sorts as it sorts its own: `<timestamp>-<Name>.ts`. */
export function typeormFileName(m: Migration, schema: string): string {
  return `${typeormTimestamp(m.version)}-${typeormMigrationName(m.version, schema)}.ts`;
}

/** Writes the file of every migration into `dir` (created if missing), keeping those already there. */
export function writeTypeormMigrations(dir: string, schema: string): { written: string[]; kept: string[] } {
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  const kept: string[] = [];
  for (const m of loadMigrations()) {
    const file = join(dir, typeormFileName(m, schema));
    if (existsSync(file)) {
      kept.push(file);
      continue;
    }
    writeFileSync(file, typeormMigrationFile(m, schema), { flag: 'wx' });
    written.push(file);
  }
  return { written, kept };
}
