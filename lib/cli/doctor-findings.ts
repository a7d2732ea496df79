import type { NodeInfo, QueueOverviewRow } from '../core/dashboard-reads';
import type { HorizonHolder, JobsVacuumStats, SilentNode, XminHolder } from '../db/doctor';
import type { JobsTableSize } from '../db/vacuum';
import { humanDuration } from './output';

/** How bad a finding is: an `error` makes `doctor` exit 1. */
export type Severity = 'error' | 'warning' | 'info';

/** One thing an operator should look at, and what to do about it. */
export interface Finding {
  /** Which check found it: migrations, xmin-horizon, bloat, partitions, paused-queue, silent-node, stalled, no-workers, check-failed. */
  readonly check: string;
  readonly severity: Severity;
  readonly message: string;
  readonly fix: string;
  /** The figures behind it, for --json. */
  readonly details?: Readonly<Record<string, unknown>>;
}

/** What the history's partitions look like (lib/db/history/partitions.ts). */
export interface PartitionsSnapshot {
  /** `partitioned`: version 10's layout; `legacy`: a history from before it, not converted yet. */
  readonly layout: 'partitioned' | 'legacy';
  readonly intervalMs: number;
  /** The range of the current interval when no partition covers it (finished jobs go to the default one). */
  readonly currentMissing: { lo: number; hi: number } | null;
  /** Ranges of the next intervals not created yet. */
  readonly aheadMissing: readonly { lo: number; hi: number }[];
}

/** Everything the doctor judges: read by commands/doctor.ts, or made up by a unit test. */
export interface DoctorSnapshot {
  readonly now: number;
  readonly schema: string;
  readonly version: number;
  readonly latest: number;
  readonly jobsTable?: JobsTableSize & JobsVacuumStats;
  readonly xminHolders?: readonly XminHolder[];
  readonly otherHolders?: readonly HorizonHolder[];
  readonly partitions?: PartitionsSnapshot;
  readonly queues?: readonly QueueOverviewRow[];
  readonly liveNodes?: readonly NodeInfo[];
  readonly silentNodes?: readonly SilentNode[];
  /** Checks that could not run, and why. */
  readonly failedChecks?: readonly { check: string; error: string }[];
}

/** The doctor's limits (its flags). */
export interface DoctorLimits {
  /** A snapshot (transaction) older than this holding the vacuum horizon is an error. @default 10 minutes */
  readonly maxXminAgeMs: number;
  /** Dead row versions in the jobs table above this, and above the live ones, are a warning. @default 50,000 */
  readonly maxDeadTuples: number;
}

export const DOCTOR_DEFAULTS: DoctorLimits = { maxXminAgeMs: 600_000, maxDeadTuples: 50_000 };

/** Transactions behind a replication slot's xmin that are worth a warning even while it streams. */
const SLOT_XID_AGE = 1_000_000;

const ORDER: Record<Severity, number> = { error: 0, warning: 1, info: 2 };

/** The findings of a snapshot, errors first. Pure: unit-tested in test/unit/cli-doctor.spec.ts. */
export function diagnose(s: DoctorSnapshot, limits: DoctorLimits = DOCTOR_DEFAULTS): Finding[] {
  const out: Finding[] = [];
  const add = (f: Finding) => out.push(f);

  if (s.version === 0) {
    add({
      check: 'migrations',
      severity: 'error',
      message: `Schema "${s.schema}" has no nestjs-pg-queue tables in this database.`,
      fix: 'Check --url and --schema; to create them: nestjs-pg-queue migrate (or boot an app with migrate: true).',
    });
    return out;
  }
  if (s.version < s.latest) {
    add({
      check: 'migrations',
      severity: 'error',
      message: `Schema "${s.schema}" is at version ${s.version}; this nestjs-pg-queue needs ${s.latest} (${s.latest - s.version} migration(s) pending).`,
      fix: 'nestjs-pg-queue migrate (review first with --print), or boot an app with migrate: true.',
      details: { version: s.version, latest: s.latest },
    });
  } else if (s.version > s.latest) {
    add({
      check: 'migrations',
      severity: 'warning',
      message: `Schema "${s.schema}" is at version ${s.version}, newer than this nestjs-pg-queue knows (${s.latest}).`,
      fix: 'Run the CLI of the nestjs-pg-queue version your apps run (npx nestjs-pg-queue@<version>).',
    });
  }

  for (const h of s.xminHolders ?? []) {
    if (h.ageMs === null || h.ageMs < limits.maxXminAgeMs) continue;
    add({
      check: 'xmin-horizon',
      severity: 'error',
      message:
        `pid ${h.pid} (role "${h.role}", application "${h.application}", ${h.state ?? 'state unknown'}) has held a snapshot ` +
        `for ${humanDuration(h.ageMs)} (${h.xidAge} transactions old): no job row deleted or updated since can be vacuumed while it does, ` +
        'so the jobs table and its indexes grow and claims slow down.',
      fix:
        `End that transaction: commit or roll back in the app that holds it, or SELECT pg_catalog.pg_terminate_backend(${h.pid}). ` +
        'Against repeats: set idle_in_transaction_session_timeout (and statement_timeout) for that role.',
      details: { ...h },
    });
  }
  for (const h of s.otherHolders ?? []) {
    const old =
      h.kind === 'prepared transaction'
        ? h.since !== null && s.now - new Date(h.since).getTime() >= limits.maxXminAgeMs
        : h.active === false || h.xidAge >= SLOT_XID_AGE;
    if (!old) continue;
    add({
      check: 'xmin-horizon',
      severity: 'error',
      message:
        h.kind === 'prepared transaction'
          ? `Prepared transaction "${h.name}" (since ${new Date(h.since as Date).toISOString()}, ${h.xidAge} transactions old) holds the vacuum horizon.`
          : `Replication slot "${h.name}" (${h.active ? 'streaming' : 'inactive'}, ${h.xidAge} transactions behind) holds the vacuum horizon.`,
      fix:
        h.kind === 'prepared transaction'
          ? `COMMIT PREPARED '${h.name}' or ROLLBACK PREPARED '${h.name}', as its transaction manager would.`
          : h.active
            ? 'The standby or consumer of that slot lags (or runs long queries with hot_standby_feedback): fix it, or drop the slot.'
            : `A slot no one reads from: SELECT pg_catalog.pg_drop_replication_slot('${h.name}') if its consumer is gone.`,
      details: { ...h },
    });
  }

  const t = s.jobsTable;
  if (t && t.dead >= limits.maxDeadTuples && t.dead > t.live) {
    const last = [t.lastAutovacuum, t.lastVacuum].filter((d): d is Date => d !== null).map((d) => new Date(d).getTime());
    const since = last.length ? `last vacuumed ${humanDuration(s.now - Math.max(...last))} ago` : 'never vacuumed';
    add({
      check: 'bloat',
      severity: 'warning',
      message: `The jobs table holds ${Math.round(t.dead)} dead row versions against ${Math.round(t.live)} live ones (${since}): claims read past them.`,
      fix:
        `Run VACUUM (VERBOSE) "${s.schema}".jobs. If they come back, an old snapshot holds the horizon (see xmin-horizon) or ` +
        'autovacuum is too slow for the churn (lower autovacuum_vacuum_cost_delay, or the vacuumAtDeadTuples module option).',
      details: { ...t },
    });
  }

  const p = s.partitions;
  if (p?.layout === 'legacy') {
    add({
      check: 'partitions',
      severity: 'info',
      message: 'The history predates version 10 and is not partitioned yet: the maintenance pass converts it, a step at a time.',
      fix: 'Nothing, if a node runs: each maintenance pass does a step. If none runs, start one.',
    });
  } else if (p) {
    const range = (r: { lo: number; hi: number }) => `${new Date(r.lo).toISOString()} to ${new Date(r.hi).toISOString()}`;
    if (p.currentMissing) {
      add({
        check: 'partitions',
        severity: 'error',
        message:
          `No history partition covers now (${range(p.currentMissing)}): jobs finishing now land in job_history_done_default, ` +
          'which retention cannot drop by partition and which must be moved when the partition is created.',
        fix:
          'The maintenance pass of a node creates partitions ahead: check that a node runs (nestjs-pg-queue status) and that ' +
          'no session of another role holds the history lock (its log warns); or create them now: nestjs-pg-queue doctor --create-partitions.',
        details: { ...p.currentMissing, intervalMs: p.intervalMs },
      });
    }
    if (p.aheadMissing.length) {
      add({
        check: 'partitions',
        severity: 'warning',
        message: `${p.aheadMissing.length} history partition(s) ahead are missing (${p.aheadMissing.map(range).join('; ')}).`,
        fix: "A node's maintenance pass creates them: check that one runs; or nestjs-pg-queue doctor --create-partitions.",
        details: { missing: p.aheadMissing, intervalMs: p.intervalMs },
      });
    }
  }

  const live = s.liveNodes;
  for (const q of s.queues ?? []) {
    if (q.paused && q.waiting + q.delayed > 0) {
      add({
        check: 'paused-queue',
        severity: 'warning',
        message: `Queue "${q.name}" is paused with ${q.waiting} job(s) due and ${q.delayed} delayed${q.oldestWaitingAgeMs !== null ? `; the oldest has waited ${humanDuration(q.oldestWaitingAgeMs)}` : ''}.`,
        fix: `If the pause is over: nestjs-pg-queue resume --queue ${q.name} (or queue.resume()).`,
        details: { queue: q.name, waiting: q.waiting, delayed: q.delayed },
      });
    }
    if (q.stalled > 0) {
      add({
        check: 'stalled',
        severity: 'warning',
        message: `Queue "${q.name}" has ${q.stalled} running job(s) past their lease: their node is gone or stuck, and no maintenance pass has rescued them.`,
        fix: 'The maintenance pass of any running node rescues them within rescueIntervalMs: start a node if none runs.',
        details: { queue: q.name, stalled: q.stalled },
      });
    }
    if (live && live.length === 0 && !q.paused && q.waiting > 0) {
      add({
        check: 'no-workers',
        severity: 'warning',
        message: `Queue "${q.name}" has ${q.waiting} job(s) due${q.oldestWaitingAgeMs !== null ? ` (oldest ${humanDuration(q.oldestWaitingAgeMs)})` : ''} and no node heartbeats into this schema.`,
        fix: 'Start the app that runs its workers (workers: true), or check that it connects to this database and schema.',
        details: { queue: q.name, waiting: q.waiting },
      });
    }
  }

  for (const n of s.silentNodes ?? []) {
    add({
      check: 'silent-node',
      severity: 'warning',
      message:
        `Node ${n.id} (${n.host}, pid ${n.pid}) last heartbeat ${humanDuration(n.silentMs)} ago (it beats every ${humanDuration(n.heartbeatMs)})` +
        `${n.running ? `, and still holds ${n.running} running job(s)` : ''}.`,
      fix:
        'If that process is gone, nothing to do: the maintenance pass rescues its jobs once their lease expires and drops its row. ' +
        'If it still runs, it is stuck (event loop blocked, or cut off from the database): restart it.',
      details: { ...n },
    });
  }

  for (const c of s.failedChecks ?? []) {
    add({
      check: 'check-failed',
      severity: 'warning',
      message: `The ${c.check} check could not run: ${c.error}`,
      fix: 'Run doctor as a role that may read the queue schema and pg_stat_activity (a member of pg_read_all_stats sees every session).',
    });
  }
  return out.sort((a, b) => ORDER[a.severity] - ORDER[b.severity]);
}
