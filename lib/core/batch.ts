import { PgQueueConfigError, PgQueueError } from './errors';
import { quote } from './input-text';
import { MAX_NODE_CONCURRENCY } from './concurrency-checks';
import type { ActiveJob } from './job';

/**
 * `@Process({ name, batch: { size, waitMs } })`: one handler call for up to `size` jobs of that
 * name (docs/processing.md, "Batch handlers").
 */
export interface BatchOptions {
  /**
   * The most jobs one call receives, from 1 to 1000. Each job of a batch holds one of the
   * queue's concurrency slots, so the queue's `concurrency` must be at least `size`.
   */
  readonly size: number;
  /**
   * How long to wait, after the first job of a batch arrived, for a fuller batch: the call goes
   * out when `size` jobs are there or `waitMs` has passed, whichever comes first.
   * @default 0 (the jobs at hand: those one claim brought)
   */
  readonly waitMs?: number;
}

/** `BatchOptions` checked, with its default applied. */
export interface ResolvedBatch {
  readonly size: number;
  readonly waitMs: number;
}

/**
 * A batch handler: receives the jobs of one call (1 to `size`, in the order they were claimed,
 * which is not their ids' order) and returns an array of per-job results (same length and
 * order), or nothing (every job completes with no result). Throwing `BatchError` fails only the
 * jobs it names; throwing anything else fails every job of the call, each with its own attempt.
 */
export type BatchJobHandler<TPayload = unknown> = (jobs: ActiveJob<TPayload>[]) => unknown;

/** A batch handler as discovery found it. */
export interface BatchHandlerEntry {
  readonly handler: BatchJobHandler;
  readonly batch: ResolvedBatch;
  /** `Class.method`, for messages. */
  readonly where: string;
}

/** Longest wait for a fuller batch the options accept (a minute: a batch's jobs hold their slots and leases meanwhile). */
export const MAX_BATCH_WAIT_MS = 60_000;

/** `@Process({ batch })` checked; throws PgQueueConfigError naming the method's job and what to write. */
export function resolveBatchOptions(value: unknown, job: string): ResolvedBatch {
  const where = `@Process({ name: ${quote(job)}, batch })`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new PgQueueConfigError(`${where}: batch must be an object such as { size: 100, waitMs: 50 }, got ${quote(value)}.`);
  }
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'size' && k !== 'waitMs') {
      throw new PgQueueConfigError(
        `${where}: unknown batch option ${quote(k)}${k === 'timeout' || k === 'wait' ? ' (use waitMs)' : ''}. ` +
          'Use batch: { size, waitMs? }.',
      );
    }
  }
  const { size, waitMs = 0 } = o;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > MAX_NODE_CONCURRENCY) {
    throw new PgQueueConfigError(
      `${where}: batch.size must be a whole number from 1 to ${MAX_NODE_CONCURRENCY} (the most jobs one call receives), got ${quote(size)}.`,
    );
  }
  if (typeof waitMs !== 'number' || !Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_BATCH_WAIT_MS) {
    throw new PgQueueConfigError(
      `${where}: batch.waitMs must be a whole number of milliseconds from 0 to ${MAX_BATCH_WAIT_MS}, got ${quote(waitMs)}.`,
    );
  }
  return { size, waitMs };
}

/**
 * Refuses, at boot, a batch larger than the queue's concurrency: each job of a batch holds a
 * slot, so the batch could never fill, and every call would wait its full `waitMs` for jobs that
 * cannot come.
 */
export function checkBatchConcurrency(queue: string, concurrency: number, batches: ReadonlyMap<string, BatchHandlerEntry>): void {
  for (const [name, b] of batches) {
    if (b.batch.size <= concurrency) continue;
    throw new PgQueueConfigError(
      `${b.where} (@Process({ name: ${quote(name)}, batch: { size: ${b.batch.size} } })): queue "${queue}" runs ${concurrency} ` +
        `job(s) at once in this process (concurrency), and each job of a batch holds one of those slots, so a batch could ` +
        `never hold ${b.batch.size}. Raise the queue's concurrency to at least ${b.batch.size} (registerQueue({ concurrency }) ` +
        'or @Processor({ name, concurrency })), twice that to collect the next batch while one runs, or lower batch.size.',
    );
  }
}

/**
 * Thrown by a batch handler to fail some jobs of its call and complete the others: `errors` maps
 * a job (by its id, a string, or by its index in the array, a number) to what its attempt threw.
 * Each of those jobs fails as if its own handler had thrown that error (retry with its backoff,
 * fail, dead-letter; a `SnoozeJobError`, `CancelJobError` or `UnrecoverableError` steers it as
 * it would a single job); the jobs not named complete, with their entry of `results` if given.
 * @example
 * const errors = new Map<number, Error>();
 * const results = await Promise.all(jobs.map((job, i) => send(job.payload).catch((e: Error) => errors.set(i, e))));
 * if (errors.size) throw new BatchError(errors, { results });
 * return results;
 */
export class BatchError extends PgQueueError {
  /** What each failed job's attempt threw, by job id (string) or index in the batch (number). */
  readonly errors: ReadonlyMap<string | number, unknown>;
  /**
   * The results of the jobs that completed: an array in the batch's order (the entries of failed
   * jobs are ignored) or a map by job id or index. Jobs with no entry complete with no result.
   */
  readonly results: readonly unknown[] | ReadonlyMap<string | number, unknown> | undefined;

  constructor(
    errors: ReadonlyMap<string | number, unknown>,
    options?: { readonly results?: readonly unknown[] | ReadonlyMap<string | number, unknown>; readonly message?: string },
  ) {
    super(options?.message ?? `${errors.size} job(s) of the batch failed; the others completed.`);
    this.errors = errors;
    this.results = options?.results;
  }
}
