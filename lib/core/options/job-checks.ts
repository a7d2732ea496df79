import { PgQueueConfigError } from '../errors';
import { quote } from '../input-text';
import type { BackoffOptions, JobOptions, QueueJobDefaults } from '../job';
import type { ResolvedBackoff, ResolvedJobDefaults } from './resolved';
import { bool, int } from './field-checks';
import { refuseUnknownKeys } from './unknown-keys';

// Job options (add, addBulk, addFlow, and the module's and queues' defaultJobOptions): each
// source accepts its own keys, layered over the defaults below it.

/** The longest `delayMs`: 100 years, far inside PostgreSQL's timestamp range (a backoff stays within a timer's 2^31-1 ms). */
export const MAX_DELAY_MS = 100 * 365 * 86_400_000;
/** `runAt` must fall in [1970-01-01, 9999-12-31]: later instants come back from pg as Invalid Date. */
const MAX_RUN_AT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

const BACKOFF_KEYS = ['type', 'delayMs', 'maxDelayMs', 'jitter'] as const;

function resolveBackoff(where: string, b: BackoffOptions | undefined, base: ResolvedBackoff): ResolvedBackoff {
  if (b === undefined) return base;
  if (typeof b === 'number') {
    throw new PgQueueConfigError(
      `Invalid ${where}.backoff: ${quote(b)}. A backoff is an object: { type: 'fixed', delayMs: ${quote(b)} }.`,
    );
  }
  if (typeof b !== 'object' || b === null || (b.type !== 'fixed' && b.type !== 'exponential')) {
    throw new PgQueueConfigError(
      `Invalid ${where}.backoff: ${quote(b)}. Use { type: 'fixed' | 'exponential', delayMs?, maxDelayMs?, jitter? }.`,
    );
  }
  refuseUnknownKeys(`${where}.backoff`, b, BACKOFF_KEYS, { delay: 'delayMs (milliseconds)' });
  return {
    type: b.type,
    delayMs: int(`${where}.backoff.delayMs`, b.delayMs, base.delayMs, 0),
    maxDelayMs: int(`${where}.backoff.maxDelayMs`, b.maxDelayMs, base.maxDelayMs, 0),
    // A fixed backoff means "wait delayMs": it gets no jitter unless it asks for it, even over
    // the default exponential one (500 ms fixed waited 283 and 441 ms). Left out, jitter comes
    // from the layer below only when that layer has the same type.
    jitter: bool(`${where}.backoff.jitter`, b.jitter, b.type === base.type ? base.jitter : b.type === 'exponential'),
  };
}

/** Where job options come from: each accepts its own keys. */
export type JobOptionsSource = 'add' | 'bulk' | 'flow' | 'defaults';

const DEFAULT_KEYS = ['priority', 'attempts', 'backoff', 'timeoutMs'] as const;
const BULK_KEYS = [...DEFAULT_KEYS, 'delayMs', 'runAt', 'uniqueKey', 'replaceWaiting', 'deduplication', 'group'] as const;
const ADD_KEYS = [...BULK_KEYS, 'manager', 'client', 'dependsOn'] as const;
const FLOW_KEYS = [...DEFAULT_KEYS, 'delayMs', 'runAt', 'group'] as const;
const KEYS_OF: Readonly<Record<JobOptionsSource, readonly string[]>> = {
  add: ADD_KEYS,
  bulk: BULK_KEYS,
  flow: FLOW_KEYS,
  defaults: DEFAULT_KEYS,
};
const NOT_HERE: Readonly<Record<JobOptionsSource, Readonly<Record<string, string>>>> = {
  add: {},
  bulk: {
    manager: "addBulk's second argument: addBulk(jobs, { manager }), so every job joins that transaction",
    client: "addBulk's second argument: addBulk(jobs, { client }), so every job joins that transaction",
  },
  flow: {
    manager: "addFlow's second argument: addFlow(flow, { manager }), so every job of the flow joins that transaction",
    client: "addFlow's second argument: addFlow(flow, { client }), so every job of the flow joins that transaction",
    uniqueKey: 'nothing: the jobs of a flow are always new, so a flow takes no unique keys',
    replaceWaiting: 'nothing: the jobs of a flow are always new, so a flow takes no unique keys',
    dependsOn: "the flow's children: a node's children run before it",
    deduplication:
      'nothing: the jobs of a flow are always new (a deduplicated node would leave its parent waiting on a job of another flow)',
  },
  defaults: {
    uniqueKey: 'it per job, in add(); it is not a default',
    replaceWaiting: 'it per job, in add(); it is not a default',
    delayMs: 'it per job, in add(); a delay is not a default',
    runAt: 'it per job, in add(); an instant is not a default',
    deduplication: 'it per job, in add(); a key is not a default',
    group: 'it per job, in add(), or as a function of the payload in registerQueue({ defaultJobOptions: { group } })',
  },
};

/**
 * Layers `opts` over `base`, validating each field; `where` names the option in errors. Each
 * field given replaces the base's; a `backoff` given takes the fields it leaves out from the
 * base's backoff. Keys `source` does not accept are refused, saying what to use instead.
 */
export function resolveJobDefaults(
  where: string,
  opts: JobOptions | undefined,
  base: ResolvedJobDefaults,
  source: JobOptionsSource = 'defaults',
): ResolvedJobDefaults {
  if (opts === undefined) return base;
  if (typeof opts !== 'object' || opts === null) {
    throw new PgQueueConfigError(`Invalid ${where}: ${quote(opts)}; expected an object of job options.`);
  }
  refuseUnknownKeys(where, opts, KEYS_OF[source], NOT_HERE[source]);
  return {
    priority: int(`${where}.priority`, opts.priority, base.priority, -(2 ** 31)),
    attempts: int(`${where}.attempts`, opts.attempts, base.attempts, 1),
    backoff: resolveBackoff(where, opts.backoff, base.backoff),
    timeoutMs: opts.timeoutMs === undefined ? base.timeoutMs : int(`${where}.timeoutMs`, opts.timeoutMs, 0, 1),
    groupOf: base.groupOf,
  };
}

/**
 * A queue's `defaultJobOptions`: the module's keys, and `group` as a function of the payload
 * (checked to be a function here; what it returns is checked at each enqueue).
 */
export function resolveQueueJobDefaults(
  queue: string,
  opts: QueueJobDefaults | undefined,
  base: ResolvedJobDefaults,
): ResolvedJobDefaults {
  const where = `queue ${quote(queue)} defaultJobOptions`;
  if (typeof opts !== 'object' || opts === null) return resolveJobDefaults(where, opts as JobOptions | undefined, base);
  const { group, ...rest } = opts;
  if (group === undefined) return resolveJobDefaults(where, rest, base);
  if (typeof group !== 'function') {
    throw new PgQueueConfigError(
      `Invalid ${where}.group: ${quote(group)}. A default group is a function of the payload, ` +
        `(payload) => payload.tenantId; a fixed group is given per job: add(name, payload, { group }).`,
    );
  }
  return { ...resolveJobDefaults(where, rest, base), groupOf: group as (payload: unknown) => unknown };
}

/**
 * When a job may run: `runAt` (null: now + `delayMs`), checked to be within what PostgreSQL
 * stores and gives back, so an extreme value fails here and not as "timestamp out of range".
 */
export function resolveRunAt(where: string, opts: JobOptions | undefined): { runAt: Date | null; delayMs: number } {
  if (opts === undefined) return { runAt: null, delayMs: 0 };
  const { runAt, delayMs } = opts;
  if (runAt !== undefined && delayMs !== undefined) throw new PgQueueConfigError(`${where}: pass runAt or delayMs, not both.`);
  if (runAt !== undefined) {
    if (!(runAt instanceof Date) || Number.isNaN(runAt.getTime())) {
      throw new PgQueueConfigError(`${where}: runAt must be a valid Date, got ${quote(runAt)}.`);
    }
    const t = runAt.getTime();
    if (t < 0 || t > MAX_RUN_AT_MS) {
      throw new PgQueueConfigError(
        `${where}: runAt ${runAt.toISOString()} is outside 1970-01-01 to 9999-12-31. A runAt in the past runs at once: pass new Date() for now.`,
      );
    }
    return { runAt, delayMs: 0 };
  }
  if (delayMs !== undefined) {
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
      throw new PgQueueConfigError(
        `${where}: delayMs must be a number of milliseconds from 0 to ${MAX_DELAY_MS} (100 years), got ${quote(delayMs)}.` +
          (typeof delayMs === 'number' && delayMs > MAX_DELAY_MS ? ' For a later time pass runAt.' : ''),
      );
    }
    return { runAt: null, delayMs: Math.round(delayMs) };
  }
  return { runAt: null, delayMs: 0 };
}
