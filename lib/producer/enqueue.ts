import type { NewJobRow } from '../db/job-store';
import { toJsonText, UnstorableJsonError } from '../db/jsonb';
import { PgQueueConfigError, PgQueuePayloadError } from '../core/errors';
import { nameProblem, quote } from '../core/input-text';
import type { JobOptions } from '../core/job';
import { activeTraceJson } from '../core/telemetry';
import {
  DEFAULTS,
  resolveJobDefaults,
  resolveRunAt,
  validateJobName,
  type JobOptionsSource,
  type ResolvedBackoff,
  type ResolvedJobDefaults,
} from '../core/pg-queue.options';

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
  validateJobName(name);
  // Built only when there are options to check: most jobs of a bulk enqueue have none.
  const where = opts === undefined ? '' : `Job ${quote(name)} of queue ${quote(queue)}`;
  const o =
    opts === undefined ? defaults : resolveJobDefaults(`job options of ${quote(`${queue}/${name}`)}`, opts, defaults, source);
  let payloadJson: string;
  try {
    payloadJson = toJsonText(payload, 'payload');
  } catch (err) {
    if (!(err instanceof UnstorableJsonError)) throw err;
    throw new PgQueuePayloadError(
      `Payload of job ${quote(name)} in queue ${quote(queue)} cannot be stored as JSON: ${err.message}.`,
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
      `Payload of job ${quote(name)} in queue ${quote(queue)} is ${bytes} bytes of JSON, over maxPayloadBytes (${maxPayloadBytes}). ` +
        `Store large data elsewhere and pass its id, or raise maxPayloadBytes.`,
      queue,
      name,
    );
  }
  const { runAt, delayMs } = opts === undefined ? NOW : resolveRunAt(where, opts);
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
    ...(opts === undefined ? NOT_UNIQUE : uniqueness(where, opts)),
    // Every job records the trace active where it is built (with @opentelemetry/api only): the
    // producer span of add(), or whatever span the caller runs in (a flow, a handler).
    traceJson: activeTraceJson(),
  };
}

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
