import { PgQueueConfigError } from '../core/errors';
import type { GroupCounts } from '../core/group-counts';
import type { QueueCounts } from '../core/job';

/**
 * Limits on one queue's figures. A figure above its limit makes the check `down`; a limit left
 * out is not checked. `Infinity` means "no limit" (useful to lift an overall limit for one queue).
 */
export interface PgQueueQueueThresholds {
  /** Most jobs that may be available (due now, not yet claimed: `QueueCounts.waiting`). @default undefined (not checked) */
  readonly maxAvailable?: number;
  /** Oldest age, in ms, that an available job may reach (how long the backlog has waited). @default undefined (not checked) */
  readonly maxOldestAvailableAgeMs?: number;
  /**
   * Most failed jobs kept in history. Failed jobs stay until you remove them, so a check with
   * this limit stays down until someone deals with them: meant for alerting, not for probes that
   * restart the process.
   * @default undefined (not checked)
   */
  readonly maxFailed?: number;
  /** Most stalled jobs: active jobs past their lease (their worker died or stalled). @default undefined (not checked) */
  readonly maxStalled?: number;
  /**
   * Oldest age, in ms, that any one group's oldest available job may reach (jobs added with
   * `{ group }`): down when a group has waited longer, the group named in the problem and the
   * details, so a tenant starved behind another's flood is caught even while the queue as a whole
   * drains. Read only for a queue whose own oldest available job is older than this (else no group
   * can be), from `getGroupCounts({ orderBy: 'oldest' })`.
   * @default undefined (not checked)
   */
  readonly maxGroupWaitMs?: number;
}

/**
 * What `PgQueueHealthIndicator.isHealthy` (and {@link evaluateHealth}) checks.
 *
 * **Overall and per-queue limits.** The overall limits (`maxAvailable`, ...) apply to EACH queue,
 * not to the sum across queues; an entry in `queues` overrides them, limit by limit, for that
 * queue (a limit the entry leaves out still comes from the overall one). Per queue, because a sum
 * hides one stuck queue behind the normal traffic of the others, and queues' normal backlogs
 * differ by orders of magnitude: "no queue may have more than 1,000 available, except `import`,
 * which may have 100,000" is what both an overall and a per-queue limit then say.
 *
 * **Which probe.** Queue limits describe the whole system, not this process: a backlog is the same
 * on every node, and restarting them does not shrink it. Use them on a readiness or alerting
 * check; keep a liveness probe to the database, listener and workers (no queue limits).
 *
 * @example
 * { maxAvailable: 1_000, maxStalled: 0, queues: { import: { maxAvailable: 100_000 } } }
 */
export interface PgQueueHealthThresholds extends PgQueueQueueThresholds {
  /**
   * How long the LISTEN connection may stay down before the check is `down`. Workers keep going
   * by polling meanwhile, and the listener reconnects by itself (with backoff), so a short drop
   * is not a failure. Ignored in poll-only mode (`listen: false`). @default 30_000
   */
  readonly listenerGraceMs?: number;
  /** How long the database may take to answer the counts query before the check is `down`. @default 5000 */
  readonly timeoutMs?: number;
  /** Per-queue limits, by queue name; each overrides the overall limits it names, for that queue. @default {} */
  readonly queues?: Readonly<Record<string, PgQueueQueueThresholds>>;
}

/** Defaults of {@link PgQueueHealthThresholds}; every limit not listed here is off by default. */
export const HEALTH_DEFAULTS = Object.freeze({ listenerGraceMs: 30_000, timeoutMs: 5_000 });

/** What {@link evaluateHealth} judges: a snapshot, taken by the indicator (or a test). */
export interface PgQueueHealthInput {
  /** Figures of each queue, as `QueueService.getCounts()` returns them. */
  readonly counts: Readonly<Record<string, QueueCounts>>;
  /**
   * The LISTEN connection's state, or null when this process does not LISTEN (poll-only mode,
   * or no workers here). `disconnectedSince` is epoch ms; null while connected. `connection`:
   * which of the app's named connections it is, given only when the app has more than one (the
   * listener down longest, else any), so the details and the problem say which database.
   */
  readonly listener: {
    readonly connected: boolean;
    readonly disconnectedSince: number | null;
    readonly connection?: string;
  } | null;
  /**
   * Groups of the queues read for `maxGroupWaitMs` (see {@link groupChecksFor}), the oldest
   * waiting first, by queue; a queue left out is not checked for groups.
   * @default {}
   */
  readonly groups?: Readonly<Record<string, readonly GroupCounts[]>>;
  /** This process should run workers (module option `workers`). */
  readonly workersExpected: boolean;
  /** This process's workers are running (started, and not stopping). */
  readonly workersRunning: boolean;
  /** Epoch ms to measure durations against (`Date.now()`). */
  readonly now: number;
}

/** One queue's figures in the health details; `available` is `QueueCounts.waiting`. */
export type PgQueueQueueHealth = {
  /** Jobs due and waiting for a worker (checked against `maxAvailable`). */
  available: number;
  /** How long the oldest due job has waited; null when none waits (checked against `maxOldestAvailableAgeMs`). */
  oldestAvailableAgeMs: number | null;
  /** Jobs waiting for a future `runAt` (a delay, a backoff or a snooze); parked jobs are `sleeping` or `waitingSignal`. */
  delayed: number;
  /** Jobs a worker runs now. */
  active: number;
  /** Running jobs whose lease expired: their worker is gone or stuck (checked against `maxStalled`). */
  stalled: number;
  /** Jobs failed for good, still in history (checked against `maxFailed`). */
  failed: number;
  /** Parents of flows waiting on their children (`QueueCounts.waitingChildren`). */
  waitingChildren: number;
  /** Jobs parked by `job.sleep()` until their wake time (`QueueCounts.sleeping`): no worker holds them. */
  sleeping: number;
  /** Jobs parked by `job.waitFor()` until their signal (`QueueCounts.waitingSignal`): no worker holds them. */
  waitingSignal: number;
  /**
   * The groups whose oldest available job has waited longer than `maxGroupWaitMs`, by group key;
   * present only when there are some.
   */
  groups?: Record<string, { available: number; active: number; oldestAvailableAgeMs: number | null }>;
};

/** The details a health check reports (a type alias, so Terminus accepts it as extra data). */
export type PgQueueHealthDetails = {
  /** Each queue's figures, by name, in name order. */
  queues: Record<string, PgQueueQueueHealth>;
  /**
   * `'connected'`, `'disconnected for N ms'` (with ` (connection "name")` in an app of several
   * connections), `'poll-only'`, or `'not used'` (no workers here).
   */
  listener: string;
  /** `'disabled'` when the module option `workers` is false. */
  workers: 'running' | 'stopped' | 'disabled';
  /** Why the check is down, one sentence each; empty when up. */
  problems: string[];
  /**
   * Worker processes of this database seen within 3 of their heartbeats (the nodes registry the
   * dashboard lists), this one included when it runs workers; absent when the database did not answer.
   */
  nodes?: number;
};

/** The verdict of {@link evaluateHealth}. */
export interface PgQueueHealthEvaluation {
  /** The check's verdict: true exactly when `problems` is empty. */
  readonly up: boolean;
  /** Why it is down, one sentence each; empty when up. */
  readonly problems: string[];
  /** The figures the verdict was made from, as the health endpoint shows them. */
  readonly details: PgQueueHealthDetails;
}

const QUEUE_KEYS = ['maxAvailable', 'maxOldestAvailableAgeMs', 'maxFailed', 'maxStalled', 'maxGroupWaitMs'] as const;
const TOP_KEYS = [...QUEUE_KEYS, 'listenerGraceMs', 'timeoutMs', 'queues'] as const;

function show(v: unknown): string {
  return typeof v === 'number' ? String(v) : (JSON.stringify(v) ?? String(v));
}

function checkLimit(where: string, v: unknown): void {
  if (v === undefined) return;
  if (typeof v !== 'number' || Number.isNaN(v) || v < 0) {
    throw new PgQueueConfigError(
      `Health threshold ${where} must be a number >= 0 (Infinity for no limit), got ${show(v)}. Leave it out to not check it.`,
    );
  }
}

function checkKeys(where: string, o: object, known: readonly string[]): void {
  const unknown = Object.keys(o).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw new PgQueueConfigError(`Unknown health threshold(s) ${where}${unknown.join(', ')}. Known: ${known.join(', ')}.`);
  }
}

/**
 * Throws a `PgQueueConfigError` that names the bad threshold and what to change. Call it at boot
 * to fail early on thresholds read from configuration; `isHealthy` calls it too.
 */
export function validateHealthThresholds(t: PgQueueHealthThresholds): void {
  if (typeof t !== 'object' || t === null) {
    throw new PgQueueConfigError(`Health thresholds must be an object like { maxAvailable: 1000 }, got ${show(t)}.`);
  }
  checkKeys('', t, TOP_KEYS);
  for (const k of QUEUE_KEYS) checkLimit(k, t[k]);
  checkLimit('listenerGraceMs', t.listenerGraceMs);
  if (
    t.timeoutMs !== undefined &&
    !(typeof t.timeoutMs === 'number' && Number.isInteger(t.timeoutMs) && t.timeoutMs >= 1 && t.timeoutMs <= 2 ** 31 - 1)
  ) {
    throw new PgQueueConfigError(
      `Health threshold timeoutMs must be a whole number of ms from 1 to ${2 ** 31 - 1}, got ${show(t.timeoutMs)}.`,
    );
  }
  if (t.queues === undefined) return;
  if (typeof t.queues !== 'object' || t.queues === null) {
    throw new PgQueueConfigError(
      `Health threshold queues must be an object of per-queue limits by queue name, got ${show(t.queues)}.`,
    );
  }
  for (const [name, q] of Object.entries(t.queues)) {
    if (typeof q !== 'object' || q === null) {
      throw new PgQueueConfigError(
        `Health threshold queues["${name}"] must be an object like { maxAvailable: 1000 }, got ${show(q)}.`,
      );
    }
    checkKeys(`in queues["${name}"]: `, q, QUEUE_KEYS);
    for (const k of QUEUE_KEYS) checkLimit(`queues["${name}"].${k}`, q[k]);
  }
}

/** The limit that applies to one queue, and the name to quote in a problem. */
function limitFor(
  t: PgQueueHealthThresholds,
  queue: string,
  key: (typeof QUEUE_KEYS)[number],
): { max: number; label: string } | null {
  const own = t.queues && Object.hasOwn(t.queues, queue) ? t.queues[queue][key] : undefined;
  if (own !== undefined) return { max: own, label: `queues["${queue}"].${key}` };
  const overall = t[key];
  return overall === undefined ? null : { max: overall, label: key };
}

/**
 * The queues whose groups `maxGroupWaitMs` needs read, with the limit each: those with a limit
 * whose own oldest available job is older than it (when the queue's oldest job is younger, every
 * group's is), so a healthy check reads no group at all. Pure.
 */
export function groupChecksFor(
  counts: Readonly<Record<string, QueueCounts>>,
  thresholds: PgQueueHealthThresholds = {},
): { queue: string; maxGroupWaitMs: number }[] {
  const out: { queue: string; maxGroupWaitMs: number }[] = [];
  for (const queue of Object.keys(counts).sort()) {
    const limit = limitFor(thresholds, queue, 'maxGroupWaitMs');
    const oldest = counts[queue].oldestWaitingAgeMs;
    if (limit && oldest !== null && oldest > limit.max) out.push({ queue, maxGroupWaitMs: limit.max });
  }
  return out;
}

/**
 * Judges a health snapshot; pure (no I/O, no clock), so every rule is unit-tested.
 * Down when: the listener has been disconnected longer than `listenerGraceMs` (not in poll-only
 * mode); this process should run workers and they are not running; any queue's figure exceeds
 * its limit (strictly: a figure equal to its limit is fine); or a group of `input.groups` has
 * waited longer than its queue's `maxGroupWaitMs`. See {@link PgQueueHealthThresholds}
 * for how overall and per-queue limits combine.
 * @throws PgQueueConfigError when a threshold is invalid
 */
export function evaluateHealth(input: PgQueueHealthInput, thresholds: PgQueueHealthThresholds = {}): PgQueueHealthEvaluation {
  validateHealthThresholds(thresholds);
  const problems: string[] = [];

  const queues: Record<string, PgQueueQueueHealth> = {};
  for (const name of Object.keys(input.counts).sort()) {
    const c = input.counts[name];
    queues[name] = {
      available: c.waiting,
      oldestAvailableAgeMs: c.oldestWaitingAgeMs,
      delayed: c.delayed,
      active: c.active,
      stalled: c.stalled,
      failed: c.failed,
      waitingChildren: c.waitingChildren,
      sleeping: c.sleeping,
      waitingSignal: c.waitingSignal,
    };
    const over = (key: (typeof QUEUE_KEYS)[number], value: number | null, what: string) => {
      const limit = limitFor(thresholds, name, key);
      if (limit && value !== null && value > limit.max) problems.push(`queue "${name}": ${what} > ${limit.label} ${limit.max}`);
    };
    over('maxAvailable', c.waiting, `${c.waiting} available`);
    over('maxOldestAvailableAgeMs', c.oldestWaitingAgeMs, `oldest available job waiting ${c.oldestWaitingAgeMs} ms`);
    over('maxFailed', c.failed, `${c.failed} failed`);
    over('maxStalled', c.stalled, `${c.stalled} stalled (active past their lease)`);
    const groupLimit = limitFor(thresholds, name, 'maxGroupWaitMs');
    for (const g of groupLimit ? (input.groups?.[name] ?? []) : []) {
      if (!groupLimit || g.oldestWaitingAgeMs === null || g.oldestWaitingAgeMs <= groupLimit.max) continue;
      problems.push(
        `queue "${name}" group ${JSON.stringify(g.group)}: oldest available job waiting ${g.oldestWaitingAgeMs} ms > ${groupLimit.label} ${groupLimit.max}`,
      );
      const groups = (queues[name].groups ??= {});
      groups[g.group] = { available: g.waiting, active: g.active, oldestAvailableAgeMs: g.oldestWaitingAgeMs };
    }
  }

  let listener: string;
  if (input.listener === null) listener = input.workersExpected ? 'poll-only' : 'not used';
  else if (input.listener.connected) listener = 'connected';
  else {
    // Unknown since when (stopped, or never started): count from now rather than call it old.
    const forMs = Math.max(0, input.now - (input.listener.disconnectedSince ?? input.now));
    const of = input.listener.connection === undefined ? '' : ` of connection ${JSON.stringify(input.listener.connection)}`;
    listener = `disconnected for ${forMs} ms${of ? ` (connection ${JSON.stringify(input.listener.connection)})` : ''}`;
    const graceMs = thresholds.listenerGraceMs ?? HEALTH_DEFAULTS.listenerGraceMs;
    if (forMs > graceMs) {
      problems.push(
        `listener${of}: LISTEN connection down for ${forMs} ms > listenerGraceMs ${graceMs} (workers fall back to polling)`,
      );
    }
  }

  let workers: PgQueueHealthDetails['workers'];
  if (!input.workersExpected) workers = 'disabled';
  else if (input.workersRunning) workers = 'running';
  else {
    workers = 'stopped';
    problems.push('workers: not running in this process (not started yet, or shutting down)');
  }

  // problems is also reported in details; a copy, so a caller adding to one does not change the other.
  return { up: problems.length === 0, problems, details: { queues, listener, workers, problems: [...problems] } };
}
