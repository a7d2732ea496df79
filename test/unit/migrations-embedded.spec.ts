import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadMigrations } from '../../lib/db/migrator';

describe('embedded migrations', () => {
  const root = join(__dirname, '..', '..');

  it('match migrations/*.sql exactly (the generated file is not stale)', () => {
    expect(() =>
      execFileSync(process.execPath, [join(root, 'scripts', 'embed-migrations.mjs'), '--check'], { stdio: 'pipe' }),
    ).not.toThrow();
    const files = readdirSync(join(root, 'migrations'))
      .filter((f) => f.endsWith('.sql'))
      .sort();
    expect(loadMigrations().map((m) => `${String(m.version).padStart(4, '0')}_${m.name}.sql`)).toEqual(files);
    for (const m of loadMigrations()) {
      const file = `${String(m.version).padStart(4, '0')}_${m.name}.sql`;
      expect(m.sql).toBe(readFileSync(join(root, 'migrations', file), 'utf8'));
    }
  });
});
