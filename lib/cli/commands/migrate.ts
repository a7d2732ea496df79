import { latestVersion, loadMigrations, migrate } from '../../db/migrator';
import { migrationScript } from '../../db/migration-script';
import { str, UsageError } from '../args';
import { EXIT, type Command } from '../command';
import { createPartitions } from '../partitions';
import { writeTypeormMigrations } from '../typeorm-files';

const migrateCommand: Command = {
  name: 'migrate',
  summary: 'apply pending migrations (or --print their SQL, or write TypeORM migration files)',
  usage: 'migrate [--print | --typeorm <dir>] [--url <url>] [--schema <name>]',
  details: [
    'Without a flag: applies every pending migration in one transaction, under the advisory lock the',
    "module's boot takes (migrate: true), so it is safe while apps boot. Waits at most a minute for",
    'that lock, then fails naming the session holding it.',
    '--print: writes the SQL it would run, as one script for review (nothing is changed).',
    '--typeorm <dir>: writes one TypeORM migration file per migration (those not there yet), for apps',
    'that run their migrations themselves (then set migrate: false in forRoot).',
  ].join('\n'),
  flags: {
    print: { type: 'boolean', help: 'print the SQL of the pending migrations instead of running it' },
    typeorm: { type: 'string', arg: '<dir>', help: 'write TypeORM migration files into <dir> instead' },
  },
  needsCurrentSchema: false,
  async run({ values, db, print, io }) {
    const dir = str(values, 'typeorm');
    if (values.print && dir !== undefined) throw new UsageError('`migrate` takes --print or --typeorm, not both.');
    const latest = latestVersion();
    if (dir !== undefined) {
      const { written, kept } = writeTypeormMigrations(dir, db.schema);
      print({ schema: db.schema, dir, written, kept }, () =>
        [
          ...written.map((f) => `wrote ${f}`),
          `${written.length} file(s) written, ${kept.length} already there, in ${dir} (schema "${db.schema}").`,
        ].join('\n'),
      );
      return EXIT.ok;
    }
    if (values.print) {
      const pending = loadMigrations().filter((m) => m.version > db.version);
      const sql = migrationScript(db.schema, db.version, pending);
      print({ schema: db.schema, from: db.version, to: latest, pending: pending.map((m) => m.version), sql }, () =>
        sql.trimEnd(),
      );
      return EXIT.ok;
    }
    const applied = await migrate(db.pool, db.schema);
    // What a node's boot does next: the history's partitions for now and the next intervals.
    const partitions = await createPartitions(db, undefined, (m) => io.err(m));
    print({ schema: db.schema, from: db.version, to: latest, applied, partitions }, () =>
      [
        applied.length
          ? `Applied migration(s) ${applied.join(', ')} to schema "${db.schema}": now at version ${latest}.`
          : `Schema "${db.schema}" is up to date (version ${latest}).`,
        ...(partitions.length ? [`Created history partition(s) ${partitions.join(', ')}.`] : []),
      ].join('\n'),
    );
    return EXIT.ok;
  },
};

export const MIGRATE_COMMANDS: readonly Command[] = [migrateCommand];
