import { latestVersion } from '../../db/migrator';
import { parseCount, parseDuration, str } from '../args';
import { EXIT, type Command } from '../command';
import type { CliDatabase } from '../database';
import { diagnose, DOCTOR_DEFAULTS, type DoctorSnapshot, type Finding } from '../doctor-findings';
import { createPartitions, readPartitions } from '../partitions';

/** Reads everything diagnose() judges; a check that fails becomes a finding, not a crash. */
async function snapshot(db: CliDatabase, spanFlag: number | undefined): Promise<DoctorSnapshot> {
  const failedChecks: { check: string; error: string }[] = [];
  const attempt = async <T>(check: string, read: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await read();
    } catch (err) {
      failedChecks.push({ check, error: (err as Error).message });
      return undefined;
    }
  };
  const base = { now: Date.now(), schema: db.schema, version: db.version, latest: latestVersion() };
  if (db.version === 0) return base;
  const [xminHolders, otherHolders, jobsTable, partitions, queues, liveNodes, silentNodes] = await Promise.all([
    attempt('xmin-horizon', () => db.doctor.xminHolders()),
    attempt('xmin-horizon', () => db.doctor.otherHolders()),
    attempt('bloat', async () => ({ ...(await db.store.jobsTableTuples()), ...(await db.doctor.jobsVacuumStats()) })),
    attempt('partitions', () => readPartitions(db, spanFlag)),
    attempt('queues', () => db.dashboard.counts([])),
    attempt('nodes', () => db.dashboard.nodes()),
    attempt('nodes', () => db.doctor.silentNodes()),
  ]);
  return { ...base, xminHolders, otherHolders, jobsTable, partitions, queues, liveNodes, silentNodes, failedChecks };
}

function describe(findings: readonly Finding[]): string {
  if (!findings.length) return 'No findings: nothing to fix.';
  const lines: string[] = [];
  for (const f of findings) {
    lines.push(`${f.severity.toUpperCase().padEnd(7)}  ${f.check}: ${f.message}`, `         fix: ${f.fix}`, '');
  }
  const n = (s: Finding['severity']) => findings.filter((f) => f.severity === s).length;
  lines.push(`${findings.length} finding(s): ${n('error')} error(s), ${n('warning')} warning(s), ${n('info')} info.`);
  return lines.join('\n');
}

const doctorCommand: Command = {
  name: 'doctor',
  summary: 'what an operator should fix: old snapshots, bloat, partitions, paused queues, silent nodes, migrations',
  usage: 'doctor [--max-xmin-age <duration>] [--max-dead-tuples <n>] [--strict] [--create-partitions] [--json]',
  details: [
    'Each finding has a severity (error, warning, info) and the fix. Exit code 1 when a finding is an',
    'error (with --strict: a warning too), 0 otherwise.',
    'Checks: pending migrations; sessions, prepared transactions and replication slots holding the',
    "vacuum horizon back; dead row versions in the jobs table; the history's partitions (now and ahead);",
    'paused queues with waiting jobs; stalled jobs; due jobs with no live node; nodes whose heartbeat stopped.',
    '--create-partitions creates the missing history partitions first (what a node does at boot).',
  ].join('\n'),
  flags: {
    'max-xmin-age': { type: 'string', arg: '<duration>', help: 'a snapshot held longer is an error (default 10m)' },
    'max-dead-tuples': {
      type: 'string',
      arg: '<n>',
      help: 'more dead rows than this (and than live ones) in the jobs table is a warning (default 50000)',
    },
    'history-partition': {
      type: 'string',
      arg: '<duration>',
      help: "the app's historyPartitionMs (default: the span of the existing partitions)",
    },
    'create-partitions': { type: 'boolean', help: 'create the missing history partitions, then check' },
    strict: { type: 'boolean', help: 'exit 1 on warnings too' },
  },
  needsCurrentSchema: false,
  async run({ values, db, print, io }) {
    const maxXmin = str(values, 'max-xmin-age');
    const maxDead = str(values, 'max-dead-tuples');
    const span = str(values, 'history-partition');
    const limits = {
      maxXminAgeMs: maxXmin !== undefined ? parseDuration('max-xmin-age', maxXmin) : DOCTOR_DEFAULTS.maxXminAgeMs,
      maxDeadTuples: maxDead !== undefined ? parseCount('max-dead-tuples', maxDead, 0) : DOCTOR_DEFAULTS.maxDeadTuples,
    };
    const spanMs = span !== undefined ? parseDuration('history-partition', span) : undefined;
    let created: string[] = [];
    if (values['create-partitions'] && db.version > 0) {
      created = await createPartitions(db, spanMs, (m) => io.err(m));
    }
    const findings = diagnose(await snapshot(db, spanMs), limits);
    print({ schema: db.schema, findings, ...(values['create-partitions'] ? { createdPartitions: created } : {}) }, () =>
      [
        ...(values['create-partitions']
          ? [`Created ${created.length} partition(s)${created.length ? `: ${created.join(', ')}` : ''}.`, '']
          : []),
        describe(findings),
      ].join('\n'),
    );
    const failing = findings.some((f) => f.severity === 'error' || (values.strict === true && f.severity === 'warning'));
    return failing ? EXIT.failed : EXIT.ok;
  },
};

export const DOCTOR_COMMANDS: readonly Command[] = [doctorCommand];
