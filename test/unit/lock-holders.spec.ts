import { PgQueueConfigError } from '../../lib';
import { resolveModuleOptions } from '../../lib/core/options/module-checks';
import { describeHolders, ForeignLockWarnings, migrationLockKey, type LockHolder } from '../../lib/db/lock-holders';

const neighbour: LockHolder = { pid: 7, role: 'neighbour', application: 'psql', since: new Date(0), foreign: true };
const node: LockHolder = { pid: 8, role: 'app', application: '', since: null, foreign: false };

describe('ForeignLockWarnings', () => {
  it('warns about a foreign holder once per interval per lock, never about a node of this app', () => {
    let now = 0;
    const warnings: string[] = [];
    const w = new ForeignLockWarnings(
      (m) => warnings.push(m),
      60_000,
      () => now,
    );
    expect(w.report('maintenance', [node], 'x')).toBe(false);
    expect(w.report('maintenance', [node, neighbour], 'the pass')).toBe(true);
    expect(w.report('maintenance', [neighbour], 'the pass')).toBe(true);
    expect(w.report('history', [neighbour], 'the upkeep')).toBe(true);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('pid 7 (role "neighbour", application "psql", since 1970-01-01T00:00:00.000Z)');
    expect(warnings[0]).not.toContain('pid 8');
    now = 60_000;
    w.report('maintenance', [neighbour], 'the pass');
    expect(warnings).toHaveLength(3);
  });

  it('names what to look at when the holder let go before it could be named', () => {
    expect(describeHolders([])).toMatch(/no longer holding it/);
  });

  it('computes a 60-bit migration key (foreign-locks.int-spec finds the holder of the SQL key with it)', () => {
    const k = BigInt(migrationLockKey('pgqueue'));
    expect(k >= 0n && k < 1n << 60n).toBe(true);
  });
});

describe('schemaOwner option', () => {
  it('defaults to null (this role or one it is a member of), takes a role name or false', () => {
    expect(resolveModuleOptions({}).schemaOwner).toBeNull();
    expect(resolveModuleOptions({ schemaOwner: 'app_migrator' }).schemaOwner).toBe('app_migrator');
    expect(resolveModuleOptions({ schemaOwner: false }).schemaOwner).toBe(false);
  });

  it.each([[''], [true], [42], ['x'.repeat(64)]])('refuses %p with a PgQueueConfigError', (v) => {
    expect(() => resolveModuleOptions({ schemaOwner: v as never })).toThrow(PgQueueConfigError);
    expect(() => resolveModuleOptions({ schemaOwner: v as never })).toThrow(/schemaOwner/);
  });
});
