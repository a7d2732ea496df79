import { SetMetadata } from '@nestjs/common';
import { PROCESS_METADATA } from '../core/tokens';
import { validateJobName } from '../core/names';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import { resolveBatchOptions, type BatchOptions, type ResolvedBatch } from '../core/batch';
import type { ActiveJob } from '../core/job';

/** What `@Process` stores: the job name (null for the queue's catch-all), its schedule, and its batch. */
export interface ProcessMetadata {
  readonly name: string | null;
  readonly cron?: string;
  readonly tz?: string;
  /** Set for a batch handler: the method receives an array of jobs. */
  readonly batch?: ResolvedBatch;
}

/** `@Process({ name, cron, tz, batch })`: a handler that also schedules its job, or handles its jobs in batches. */
export interface ProcessOptions {
  /** The job name this method handles (and, with `cron`, enqueues). */
  readonly name: string;
  /** Enqueue this job once per tick, e.g. `'0 3 * * *'` (see `RepeatOptions`). @default undefined (not scheduled) */
  readonly cron?: string;
  /** IANA time zone of `cron`. @default UTC */
  readonly tz?: string;
  /**
   * Handle this name's jobs in batches: the method receives an array of up to `size` jobs
   * (`ActiveJob<T>[]`) instead of one job. @default undefined (one job per call)
   */
  readonly batch?: BatchOptions;
}

/** `ProcessOptions` of a batch handler (`batch` given): its method takes an array of jobs. */
export interface BatchProcessOptions extends ProcessOptions {
  /** Up to `size` jobs per call, waiting at most `waitMs` after the first for a fuller batch. */
  readonly batch: BatchOptions;
}

/** A method `@Process({ batch })` accepts: one that takes the batch's array of jobs. */
export type BatchProcessMethod = (jobs: ActiveJob<never>[]) => unknown;

/**
 * Marks a method of a `@Processor` class as the handler of one job name. Without a name it
 * handles every job of the queue that has no handler of its own. What the method returns is
 * stored as the job's result; what it throws fails the attempt. With `cron`, the job is also
 * enqueued on that schedule, once per tick across all nodes. With `batch`, the method receives
 * an array of jobs (a method that takes one job does not compile) and returns one result per job
 * or nothing; see `BatchError` to fail some of them.
 * @example @Process({ name: 'nightly-report', cron: '0 3 * * *', tz: 'Europe/Berlin' })
 * @example @Process({ name: 'send', batch: { size: 100, waitMs: 50 } }) // send(jobs: ActiveJob<Email>[])
 */
export function Process(
  options: BatchProcessOptions,
): <T extends BatchProcessMethod>(target: object, key: string | symbol, descriptor: TypedPropertyDescriptor<T>) => void;
export function Process(nameOrOptions?: string | ProcessOptions): MethodDecorator;
export function Process(nameOrOptions?: string | ProcessOptions): MethodDecorator {
  const o = typeof nameOrOptions === 'object' && nameOrOptions !== null ? nameOrOptions : { name: nameOrOptions };
  for (const k in o) {
    if (k !== 'name' && k !== 'cron' && k !== 'tz' && k !== 'batch') {
      throw new PgQueueConfigError(
        `@Process(): unknown option ${quote(k)}` +
          `${k === 'concurrency' ? ' (concurrency is per queue: registerQueue({ concurrency }) or @Processor({ name, concurrency }))' : ''}` +
          `${k === 'timezone' || k === 'timeZone' ? " (use tz, an IANA name such as 'Europe/Berlin')" : ''}` +
          `${k === 'pattern' ? ' (use cron)' : ''}` +
          `${k === 'batchSize' ? ' (use batch: { size, waitMs? })' : ''}. ` +
          'Use @Process(name) or @Process({ name, cron?, tz?, batch? }).',
      );
    }
  }
  if (o.name !== undefined) validateJobName(o.name);
  const batchValue = 'batch' in o ? o.batch : undefined;
  if (batchValue !== undefined && o.name === undefined) {
    throw new PgQueueConfigError(
      '@Process({ batch }) needs a name: a batch holds jobs of one name. Use @Process({ name, batch }).',
    );
  }
  const meta: ProcessMetadata = {
    name: o.name ?? null,
    ...('cron' in o && o.cron !== undefined ? { cron: o.cron, tz: o.tz } : {}),
    ...(batchValue !== undefined ? { batch: resolveBatchOptions(batchValue, o.name!) } : {}),
  };
  return SetMetadata(PROCESS_METADATA, meta);
}
