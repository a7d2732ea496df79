import { parseCount, parseDuration, UsageError } from '../../lib/cli/args';
import { diagnose, DOCTOR_DEFAULTS, type DoctorSnapshot } from '../../lib/cli/doctor-findings';
import { humanDuration, table } from '../../lib/cli/output';

// The doctor's verdict (lib/cli/doctor-findings.ts) on made-up snapshots, and the CLI's pure
// helpers; test/integration/cli.int-spec.ts plants the same findings in a real database.

const NOW = Date.parse('2026-12-03T12:00:00Z');
const base: DoctorSnapshot = { now: NOW, schema: 'pgqueue', version: 11, latest: 11 };
const queue = {
  name: 'q',
  waiting: 0,
  delayed: 0,
  active: 0,
  stalled: 0,
  failed: 0,
  cancelled: 0,
  waitingChildren: 0,
  paused: false,
  sleeping: 0,
  waitingSignal: 0,
  oldestWaitingAgeMs: null,
};

describe('doctor: diagnose()', () => {
  it('a healthy snapshot has no findings', () => {
    expect(diagnose({ ...base, queues: [queue], liveNodes: [], silentNodes: [], xminHolders: [], otherHolders: [] })).toEqual([]);
  });

  it('no schema, a schema behind, a schema ahead', () => {
    expect(diagnose({ ...base, version: 0 })).toEqual([expect.objectContaining({ check: 'migrations', severity: 'error' })]);
    expect(diagnose({ ...base, version: 9 })[0]).toMatchObject({
      severity: 'error',
      message: expect.stringContaining('2 migration(s) pending'),
    });
    expect(diagnose({ ...base, version: 12 })[0]).toMatchObject({ check: 'migrations', severity: 'warning' });
  });

  it('a snapshot held past the limit is an error naming the pid; one within it, or of unknown age, is not', () => {
    const holder = {
      pid: 7,
      role: 'app',
      application: 'psql',
      state: 'idle in transaction',
      xactStart: new Date(NOW),
      xidAge: 12,
    };
    const at = (ageMs: number | null) => diagnose({ ...base, xminHolders: [{ ...holder, ageMs }] });
    expect(at(DOCTOR_DEFAULTS.maxXminAgeMs)).toEqual([
      expect.objectContaining({
        check: 'xmin-horizon',
        severity: 'error',
        fix: expect.stringContaining('pg_terminate_backend(7)'),
      }),
    ]);
    expect(at(DOCTOR_DEFAULTS.maxXminAgeMs - 1)).toEqual([]);
    expect(at(null)).toEqual([]);
  });

  it('an inactive replication slot and an old prepared transaction hold the horizon', () => {
    const f = diagnose({
      ...base,
      otherHolders: [
        { kind: 'replication slot', name: 'old_slot', xidAge: 10, since: null, active: false },
        { kind: 'replication slot', name: 'live_slot', xidAge: 10, since: null, active: true },
        { kind: 'prepared transaction', name: 'tx1', xidAge: 10, since: new Date(NOW - 3_600_000), active: null },
      ],
    });
    expect(f.map((x) => x.message)).toEqual([expect.stringContaining('old_slot'), expect.stringContaining('tx1')]);
  });

  it('dead rows above the limit and above the live ones are a warning', () => {
    const table = {
      dead: 60_000,
      live: 1_000,
      pages: 10,
      recordedPages: 10,
      lastVacuum: null,
      lastAutovacuum: new Date(NOW - 7_200_000),
    };
    expect(diagnose({ ...base, jobsTable: table })).toEqual([
      expect.objectContaining({ check: 'bloat', severity: 'warning', message: expect.stringContaining('last vacuumed 2h ago') }),
    ]);
    expect(diagnose({ ...base, jobsTable: { ...table, live: 100_000 } })).toEqual([]);
    expect(diagnose({ ...base, jobsTable: table }, { ...DOCTOR_DEFAULTS, maxDeadTuples: 100_000 })).toEqual([]);
  });

  it('partitions: none for now is an error, missing ones ahead a warning, a legacy history info', () => {
    const p = { layout: 'partitioned' as const, intervalMs: 86_400_000, currentMissing: null, aheadMissing: [] };
    expect(diagnose({ ...base, partitions: p })).toEqual([]);
    expect(diagnose({ ...base, partitions: { ...p, currentMissing: { lo: 0, hi: 1 } } })[0]).toMatchObject({ severity: 'error' });
    expect(diagnose({ ...base, partitions: { ...p, aheadMissing: [{ lo: 0, hi: 1 }] } })[0]).toMatchObject({
      severity: 'warning',
    });
    expect(diagnose({ ...base, partitions: { ...p, layout: 'legacy' } })[0]).toMatchObject({ severity: 'info' });
  });

  it('a paused queue with jobs, stalled jobs, due jobs and no node, a silent node: warnings; errors sort first', () => {
    const f = diagnose({
      ...base,
      version: 10,
      queues: [
        { ...queue, name: 'paused', paused: true, waiting: 2 },
        { ...queue, name: 'empty-paused', paused: true },
        { ...queue, name: 'stuck', stalled: 1, waiting: 1, oldestWaitingAgeMs: 60_000 },
      ],
      liveNodes: [],
      silentNodes: [
        { id: 'n1', host: 'h', pid: 1, lastSeenAt: new Date(NOW - 60_000), silentMs: 60_000, heartbeatMs: 5000, running: 2 },
      ],
    });
    expect(f.map((x) => `${x.severity} ${x.check}`)).toEqual([
      'error migrations',
      'warning paused-queue',
      'warning stalled',
      'warning no-workers',
      'warning silent-node',
    ]);
    expect(f[4].message).toContain('still holds 2 running job(s)');
  });

  it('a check that could not run is said, not hidden', () => {
    expect(diagnose({ ...base, failedChecks: [{ check: 'bloat', error: 'permission denied' }] })).toEqual([
      expect.objectContaining({ check: 'check-failed', message: expect.stringContaining('permission denied') }),
    ]);
  });
});

describe('CLI helpers', () => {
  it('durations: read with units, written with the two largest', () => {
    expect(parseDuration('x', '1d')).toBe(86_400_000);
    expect(parseDuration('x', '90s')).toBe(90_000);
    expect(parseDuration('x', '1.5h')).toBe(5_400_000);
    expect(parseDuration('x', '250')).toBe(250);
    expect(() => parseDuration('older-than', 'yesterday')).toThrow(UsageError);
    expect(() => parseDuration('older-than', '-1d')).toThrow('--older-than');
    expect(humanDuration(850)).toBe('850ms');
    expect(humanDuration(250_000)).toBe('4m 10s');
    expect(humanDuration(7_200_000)).toBe('2h');
    expect(humanDuration(3 * 86_400_000 + 4 * 3_600_000 + 5000)).toBe('3d 4h');
    expect(humanDuration(null)).toBe('-');
  });

  it('counts are whole numbers of at least the minimum', () => {
    expect(parseCount('limit', '10')).toBe(10);
    expect(() => parseCount('limit', '0')).toThrow('at least 1');
    expect(() => parseCount('limit', '1e3')).toThrow(UsageError);
  });

  it('tables align their columns, numbers to the right', () => {
    expect(
      table(
        ['NAME', 'N'],
        [
          ['a', '5'],
          ['long-name', '100'],
        ],
        [1],
      ).split('\n'),
    ).toEqual(['NAME         N', 'a            5', 'long-name  100']);
  });
});
