import type { NewJobRow } from '../db/new-job';
import type { ExistingDependency } from '../db/flow-insert';
import { toJsonText, UnstorableJsonError } from '../db/jsonb';
import { PgQueueConfigError, PgQueuePayloadError } from '../core/errors';
import { nameProblem, quote } from '../core/input-text';
import type { ChildFailurePolicy, Dependency, EnqueueOptions, JobOptions } from '../core/job';
import { isJobId, validateJobName } from '../core/names';
import { activeTraceJson } from '../core/telemetry';
import { DEFAULTS } from '../core/options/defaults';
import { MAX_DELAY_MS, resolveJobDefaults, resolveRunAt, type JobOptionsSource } from '../core/options/job-checks';
import { refuseUnknownKeys } from '../core/options/unknown-keys';
import type { ResolvedBackoff, ResolvedJobDefaults } from '../core/options/resolved';

function sameBackoff(a: ResolvedBackoff, b: ResolvedBackoff): boolean {
  return a.type === b.type && a.delayMs === b.delayMs && a.maxDelayMs === b.maxDelayMs && a.jitter === b.jitter;
}

/**
 * Validates one job and turns it into a row, so that anything the database would refuse (or
 * store differently from what the caller passed) fails here, at enqueue, with a clear error.
 * `source`: `add` accepts `manager` and `client` in `opts`; `bulk` (an `addBulk` entry) does not.
 */
export function buildJobRow(
  queue: string,
  name: string,
  payload: unknown,
  opts: JobOptions | undefined,
  defaults: ResolvedJobDefaults,
  maxPayloadBytes: number,
  source: Exclude<JobOptionsSource, 'defaults'> = 'add',
): NewJobRow {
  // The jobs of one addBulk mostly share a name: it is checked again only when it changes.
  if (name !== lastValidName) {
    validateJobName(name);
    lastValidName = name;
  }
  // Built only when there are options to check: most jobs of a bulk enqueue have none.
  const where = opts === undefined ? '' : `Job ${quote(name)} of queue ${quote(queue)}`;
  const o =
    opts === undefined ? defaults : resolveJobDefaults(`job options of ${quote(`${queue}/${name}`)}`, opts, defaults, source);
  const payloadJson = payloadJsonOf(queue, name, payload, maxPayloadBytes);
  const { runAt, delayMs } = opts === undefined ? NOW : resolveRunAt(where, opts);
  const { uniqueKey, replaceWaiting } = opts === undefined ? NOT_UNIQUE : uniqueness(where, opts);
  const { dedupKey, dedupTtlMs } = opts?.deduplication === undefined ? NO_DEDUP : deduplication(where, opts);
  // A literal of fixed shape (no spread): V8 builds it from one map, 1,000 times per addBulk.
  return {
    queue,
    name,
    payload: payload === undefined ? null : payload,
    payloadJson,
    priority: o.priority,
    runAt,
    delayMs,
    maxAttempts: o.attempts,
    // The built-in default is not stored: it saves ~80 bytes a row, and NULL means "the
    // worker's queue default", which is this unless the worker configured another.
    backoff: sameBackoff(o.backoff, DEFAULTS.job.backoff) ? null : o.backoff,
    timeoutMs: o.timeoutMs,
    uniqueKey,
    replaceWaiting,
    dedupKey,
    dedupTtlMs,
    // Every job records the trace active where it is built (with @opentelemetry/api only): the
    // producer span of add(), or whatever span the caller runs in (a flow, a handler).
    traceJson: activeTraceJson(),
    group:
      opts?.group !== undefined
        ? groupKey(where, opts.group)
        : defaults.groupOf === null
          ? null
          : defaultGroup(queue, name, payload, defaults.groupOf),
  };
}

/** The longest group key (characters). */
export const MAX_GROUP_LENGTH = 200;

/**
 * The group `registerQueue({ defaultJobOptions: { group } })` gives a job added without one:
 * null or undefined for none, else checked as a job's own. A throw is wrapped, keeping its cause,
 * so the enqueue's error names the queue and the job whatever the function threw.
 */
function defaultGroup(queue: string, name: string, payload: unknown, groupOf: (payload: unknown) => unknown): string | null {
  const where = `Job ${quote(name)} of queue ${quote(queue)}: defaultJobOptions.group(payload)`;
  let g: unknown;
  try {
    g = groupOf(payload);
  } catch (err) {
    throw new PgQueueConfigError(
      `${where} threw: ${err instanceof Error ? err.message : quote(err)}. Nothing was enqueued. Make the function ` +
        'return a group for every payload of the queue (null or undefined for none), or give this job its own group.',
      { cause: err },
    );
  }
  return g === null || g === undefined ? null : groupKey(where, g);
}

/** A job's `group`, checked: 1 to MAX_GROUP_LENGTH characters, storable as text. */
export function groupKey(where: string, g: unknown): string {
  const why = typeof g === 'string' ? nameProblem(g, MAX_GROUP_LENGTH) : 'it is not a string';
  if (why)
    throw new PgQueueConfigError(
      `${where}: group ${quote(g)} cannot be used: ${why}. Use a string of 1 to ${MAX_GROUP_LENGTH} characters, such as 'tenant-42'.`,
    );
  return g as string;
}

/**
 * A payload as the JSON text stored, checked as add() checks it: storable as JSON, and within
 * maxPayloadBytes. Errors name the job by `name`, or by `id` when given (updatePayload: the
 * name is not read); the text is built only on error, as addBulk checks 1,000 payloads a call.
 */
export function payloadJsonOf(queue: string, name: string, payload: unknown, maxPayloadBytes: number, id?: string): string {
  const what = (): string => (id === undefined ? `job ${quote(name)}` : `job ${id}`);
  let payloadJson: string;
  try {
    payloadJson = toJsonText(payload, 'payload');
  } catch (err) {
    if (!(err instanceof UnstorableJsonError)) throw err;
    throw new PgQueuePayloadError(
      `Payload of ${what()} in queue ${quote(queue)} cannot be stored as JSON: ${err.message}.`,
      queue,
      name,
      {
        cause: err,
      },
    );
  }
  // A UTF-16 unit is at most 3 bytes of UTF-8: count bytes only when that bound is over the limit.
  const bytes = payloadJson.length * 3 <= maxPayloadBytes ? 0 : Buffer.byteLength(payloadJson);
  if (bytes > maxPayloadBytes) {
    throw new PgQueuePayloadError(
      `Payload of ${what()} in queue ${quote(queue)} is ${bytes} bytes of JSON, over maxPayloadBytes (${maxPayloadBytes}). ` +
        `Store large data elsewhere and pass its id, or raise maxPayloadBytes.`,
      queue,
      name,
    );
  }
  return payloadJson;
}

/** The last job name validateJobName accepted (a string: names are compared by value). */
let lastValidName: string | null = null;

const BULK_ENTRY_KEYS = ['name', 'payload', 'opts'];

/** Throws unless `j` (entry `i` of an addBulk call) is `{ name, payload, opts? }`; `data` is bullmq's `payload`. */
export function checkBulkEntry(queue: string, j: unknown, i: number): void {
  if (typeof j !== 'object' || j === null) {
    throw new PgQueueConfigError(
      `addBulk() of queue ${quote(queue)}: entry ${i} is ${quote(j)}; expected { name, payload, opts? }.`,
    );
  }
  for (const k in j) {
    if (!BULK_ENTRY_KEYS.includes(k)) {
      throw new PgQueueConfigError(
        `addBulk() of queue ${quote(queue)}: entry ${i} has unknown key ${quote(k)}` +
          `${k === 'data' ? ' (use payload, as in add(name, payload))' : ''}. An entry is { name, payload, opts? }.`,
      );
    }
  }
}

const NOW = { runAt: null, delayMs: 0 } as const;
const NOT_UNIQUE = { uniqueKey: null, replaceWaiting: false } as const;

function uniqueness(where: string, opts: JobOptions): { uniqueKey: string | null; replaceWaiting: boolean } {
  const key = opts.uniqueKey;
  const replace = opts.replaceWaiting;
  if (replace !== undefined && typeof replace !== 'boolean') {
    throw new PgQueueConfigError(`${where}: replaceWaiting must be true or false, got ${quote(replace)}.`);
  }
  if (key === undefined) {
    if (replace)
      throw new PgQueueConfigError(`${where}: replaceWaiting needs a uniqueKey (it replaces the waiting job with that key).`);
    return { uniqueKey: null, replaceWaiting: false };
  }
  // A lone surrogate would be stored as U+FFFD: two different keys would then collide, and the
  // job inserted under the changed key could not be found by the key the caller passed.
  const why = nameProblem(key, 1000);
  if (why)
    throw new PgQueueConfigError(
      `${where}: uniqueKey ${quote(key)} cannot be used: ${why}. Use a string of 1 to 1000 characters.`,
    );
  return { uniqueKey: key, replaceWaiting: replace ?? false };
}

const NO_DEDUP = { dedupKey: null, dedupTtlMs: 0 } as const;
const DEDUP_KEYS = ['key', 'ttlMs'] as const;
const DEDUP_HINTS: Readonly<Record<string, string>> = {
  id: 'key (BullMQ calls it id)',
  ttl: 'ttlMs (milliseconds)',
  extend: 'nothing: a window starts at the first add and is never extended; to debounce use uniqueKey with replaceWaiting',
  replace: 'uniqueKey with replaceWaiting: true (debounce), instead of deduplication',
};

/**
 * `deduplication: { key, ttlMs }` (BullMQ's throttle mode): checked alone, then against the
 * options it cannot be combined with (each combination has one meaning, or none; see docs/producing.md).
 */
function deduplication(where: string, opts: JobOptions): { dedupKey: string; dedupTtlMs: number } {
  const d = opts.deduplication as unknown;
  if (typeof d !== 'object' || d === null || Array.isArray(d)) {
    throw new PgQueueConfigError(`${where}: deduplication must be { key, ttlMs }, got ${quote(d)}.`);
  }
  refuseUnknownKeys(`${where}.deduplication`, d, DEDUP_KEYS, DEDUP_HINTS);
  const { key, ttlMs } = d as { key?: unknown; ttlMs?: unknown };
  const why = nameProblem(key, 1000);
  if (why) {
    throw new PgQueueConfigError(
      `${where}: deduplication.key ${quote(key)} cannot be used: ${why}. Use a string of 1 to 1000 characters.`,
    );
  }
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_DELAY_MS) {
    throw new PgQueueConfigError(
      `${where}: deduplication.ttlMs must be a whole number of milliseconds from 1 to ${MAX_DELAY_MS} (100 years), got ${quote(ttlMs)}. ` +
        'For a key held only while its job is live, use uniqueKey instead.',
    );
  }
  if (opts.uniqueKey !== undefined) {
    throw new PgQueueConfigError(
      `${where}: deduplication cannot be combined with uniqueKey. uniqueKey holds a key while its job is live; ` +
        'deduplication holds it for ttlMs from the first add, finished or not. Pick the one you mean.',
    );
  }
  if ((opts as EnqueueOptions).dependsOn !== undefined) {
    throw new PgQueueConfigError(
      `${where}: deduplication cannot be combined with dependsOn; a job with dependencies is always new.`,
    );
  }
  return { dedupKey: key as string, dedupTtlMs: ttlMs };
}

const POLICIES: readonly ChildFailurePolicy[] = ['fail-parent', 'ignore'];

/** Checks a child's `onFailure` (undefined: the default, 'fail-parent'). */
export function failurePolicy(where: string, value: unknown): ChildFailurePolicy {
  if (value === undefined) return 'fail-parent';
  if (!POLICIES.includes(value as ChildFailurePolicy)) {
    throw new PgQueueConfigError(`${where}: onFailure must be 'fail-parent' or 'ignore', got ${quote(value)}.`);
  }
  return value as ChildFailurePolicy;
}

/**
 * Validates `dependsOn` of an add: an array of job ids, or of `{ id, onFailure? }`; each id once.
 * Returns the edges to existing jobs (node 0 is the job being added).
 */
export function resolveDependencies(queue: string, name: string, deps: unknown, unique: boolean): ExistingDependency[] {
  const where = `Job ${quote(name)} of queue ${quote(queue)}`;
  if (!Array.isArray(deps)) {
    throw new PgQueueConfigError(`${where}: dependsOn must be an array of job ids (or { id, onFailure }), got ${quote(deps)}.`);
  }
  if (unique && deps.length) {
    throw new PgQueueConfigError(`${where}: dependsOn cannot be combined with uniqueKey; a job with dependencies is always new.`);
  }
  const seen = new Set<string>();
  return (deps as Dependency[]).map((d, i) => {
    const obj = typeof d === 'object' && d !== null;
    if (obj) {
      for (const k in d) {
        if (k !== 'id' && k !== 'onFailure') {
          throw new PgQueueConfigError(
            `${where}: dependsOn[${i}] has unknown key ${quote(k)}; an entry is an id or { id, onFailure? }.`,
          );
        }
      }
    }
    const id = obj ? (d as { id: unknown }).id : d;
    if (typeof id !== 'string' || !isJobId(id)) {
      throw new PgQueueConfigError(`${where}: dependsOn[${i}] is ${quote(id)}; a job id is a string of digits (job.id).`);
    }
    if (seen.has(id)) throw new PgQueueConfigError(`${where}: dependsOn names job ${id} twice; name each job once.`);
    seen.add(id);
    return {
      node: 0,
      id,
      onFailure: failurePolicy(`${where}: dependsOn[${i}]`, obj ? (d as { onFailure?: unknown }).onFailure : undefined),
    };
  });
}
