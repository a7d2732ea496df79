import type { NewJobRow } from '../db/job-store';
import { hasLoneSurrogate, isStorableJson } from '../db/jsonb';
import { PgQueueConfigError, PgQueuePayloadError } from '../core/errors';
import type { JobOptions } from '../core/job';
import { DEFAULTS, resolveJobDefaults, validateJobName, type ResolvedBackoff, type ResolvedJobDefaults } from '../core/pg-queue.options';

function sameBackoff(a: ResolvedBackoff, b: ResolvedBackoff): boolean {
  return a.type === b.type && a.delayMs === b.delayMs && a.maxDelayMs === b.maxDelayMs && a.jitter === b.jitter;
}

/**
 * Validates one job and turns it into a row, so that anything the database would refuse (or
 * store differently from what the caller passed) fails here, at enqueue, with a clear error.
 */
export function buildJobRow(
  queue: string,
  name: string,
  payload: unknown,
  opts: JobOptions | undefined,
  defaults: ResolvedJobDefaults,
  maxPayloadBytes: number,
): NewJobRow {
  validateJobName(name);
  const o = resolveJobDefaults(`job options of "${queue}/${name}"`, opts, defaults);
  let payloadJson: string | undefined;
  try {
    payloadJson = JSON.stringify(payload === undefined ? null : payload);
  } catch (err) {
    throw new PgQueuePayloadError(
      `Payload of job "${name}" in queue "${queue}" cannot be stored as JSON: ${(err as Error).message}. ` +
        `Pass plain data: convert BigInt to a string, remove circular references.`,
      queue,
      name,
      { cause: err },
    );
  }
  if (payloadJson === undefined) {
    throw new PgQueuePayloadError(
      `Payload of job "${name}" in queue "${queue}" is not JSON data (a function or symbol?). Pass plain data.`,
      queue,
      name,
    );
  }
  if (!isStorableJson(payloadJson)) {
    throw new PgQueuePayloadError(
      hasLoneSurrogate(payloadJson)
        ? `Payload of job "${name}" in queue "${queue}" contains a lone UTF-16 surrogate (half of an emoji or other ` +
            `character, usually from cutting a string with slice or substring), which PostgreSQL's jsonb cannot store. ` +
            `Cut strings between characters, or pass them through String.prototype.toWellFormed().`
        : `Payload of job "${name}" in queue "${queue}" contains a NUL character (\\u0000), which PostgreSQL's jsonb cannot store. Remove or encode it.`,
      queue,
      name,
    );
  }
  // A UTF-16 unit is at most 3 bytes of UTF-8: count bytes only when that bound is over the limit.
  const bytes = payloadJson.length * 3 <= maxPayloadBytes ? 0 : Buffer.byteLength(payloadJson);
  if (bytes > maxPayloadBytes) {
    throw new PgQueuePayloadError(
      `Payload of job "${name}" in queue "${queue}" is ${bytes} bytes of JSON, over maxPayloadBytes (${maxPayloadBytes}). ` +
        `Store large data elsewhere and pass its id, or raise maxPayloadBytes.`,
      queue,
      name,
    );
  }
  let runAt: Date | null = null;
  let delayMs = 0;
  if (opts?.runAt !== undefined && opts.delayMs !== undefined) {
    throw new PgQueueConfigError(`Job "${queue}/${name}": pass runAt or delayMs, not both.`);
  }
  if (opts?.runAt !== undefined) {
    if (!(opts.runAt instanceof Date) || Number.isNaN(opts.runAt.getTime())) {
      throw new PgQueueConfigError(`Job "${queue}/${name}": runAt must be a valid Date.`);
    }
    runAt = opts.runAt;
  } else if (opts?.delayMs !== undefined) {
    if (typeof opts.delayMs !== 'number' || !Number.isFinite(opts.delayMs) || opts.delayMs < 0) {
      throw new PgQueueConfigError(`Job "${queue}/${name}": delayMs must be a number >= 0, got ${String(opts.delayMs)}.`);
    }
    delayMs = Math.round(opts.delayMs);
  }
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
    ...uniqueness(queue, name, opts),
  };
}

function uniqueness(queue: string, name: string, opts: JobOptions | undefined): { uniqueKey: string | null; replaceWaiting: boolean } {
  const key = opts?.uniqueKey;
  const replace = opts?.replaceWaiting;
  if (replace !== undefined && typeof replace !== 'boolean') {
    throw new PgQueueConfigError(`Job "${queue}/${name}": replaceWaiting must be true or false, got ${String(replace)}.`);
  }
  if (key === undefined) {
    if (replace) throw new PgQueueConfigError(`Job "${queue}/${name}": replaceWaiting needs a uniqueKey (it replaces the waiting job with that key).`);
    return { uniqueKey: null, replaceWaiting: false };
  }
  if (typeof key !== 'string' || key.length === 0 || key.length > 1000 || key.includes('\u0000')) {
    throw new PgQueueConfigError(`Job "${queue}/${name}": uniqueKey must be a string of 1 to 1000 characters without NUL, got ${JSON.stringify(key)}.`);
  }
  return { uniqueKey: key, replaceWaiting: replace ?? false };
}
