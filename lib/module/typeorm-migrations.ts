import { clientExecutor } from '../db/executor';
import { applyMigration, loadMigrations } from '../db/migrator';
import { typeormMigrationName } from '../db/migration-script';
import { validateSchemaName } from '../core/names';

/** The part of TypeORM's QueryRunner a migration uses. */
interface QueryRunnerLike {
  query(query: string, parameters?: unknown[]): Promise<unknown>;
}

/** The shape of a TypeORM migration class. */
export interface PgQueueMigrationClass {
  new (): { name: string; up(queryRunner: QueryRunnerLike): Promise<void>; down(queryRunner: QueryRunnerLike): Promise<void> };
}

/**
 * TypeORM migration classes, one per numbered SQL file, for apps that run their own migrations
 * (then set `migrate: false`). They record their version in the queue's own table too, so
 * either path sees the other's work.
 * @example new DataSource({ ..., migrations: [...pgQueueMigrations({ schema: 'pgqueue' }), ...mine] })
 */
export function pgQueueMigrations(opts: { schema?: string } = {}): PgQueueMigrationClass[] {
  const schema = validateSchemaName(opts.schema ?? 'pgqueue');
  return loadMigrations().map((m) => {
    const name = typeormMigrationName(m.version, schema);
    const cls = class {
      name = name;
      async up(queryRunner: QueryRunnerLike): Promise<void> {
        const exec = clientExecutor({
          query: async (text: string, values?: unknown[]) => {
            const out = await queryRunner.query(text, values);
            return { rows: Array.isArray(out) ? out : [] };
          },
        });
        await applyMigration(exec, schema, m);
      }
      async down(): Promise<void> {
        throw new Error(`nestjs-pg-queue migrations are forward-only; ${name} cannot be reverted.`);
      }
    };
    Object.defineProperty(cls, 'name', { value: name });
    return cls;
  });
}
