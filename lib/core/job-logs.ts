import { PgQueueConfigError } from './errors';
import { quote } from './input-text';
import { int } from './options/field-checks';
import { refuseUnknownKeys } from './options/unknown-keys';

/**
 * Which lines `queue.getJobLogs()` reads: a page of the job's log, oldest line first.
 * @example
 * const { logs, count } = await queue.getJobLogs(id, { offset: 100, limit: 100 }); // lines 101 to 200
 */
export interface GetJobLogsOptions {
  /**
   * How many lines to skip from the first one.
   * @default 0
   */
  readonly offset?: number;
  /**
   * The most lines to return, from 1 to 1,000,000.
   * @default 1000 (a whole log of the default `jobLogs.maxLines`)
   */
  readonly limit?: number;
}

/** One page of a job's log (`queue.getJobLogs()`): BullMQ's `{ logs, count }`, and what the caps dropped. */
export interface JobLogsPage {
  /** The lines of the page, oldest first. */
  readonly logs: string[];
  /** How many lines the job's log holds (every page). */
  readonly count: number;
  /** How many lines were logged after the caps were reached (module option `jobLogs`): counted, not kept. */
  readonly dropped: number;
}

/** The page of an unknown job (or one of another queue), as BullMQ answers it. */
export const EMPTY_LOGS: JobLogsPage = Object.freeze({ logs: [], count: 0, dropped: 0 });

/** Validates getJobLogs' options. */
export function resolveGetJobLogs(queue: string, opts: GetJobLogsOptions | undefined): { offset: number; limit: number } {
  const where = `getJobLogs() of queue ${quote(queue)}`;
  if (opts === undefined) return { offset: 0, limit: 1000 };
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) {
    throw new PgQueueConfigError(`${where}: expected { offset?, limit? }, got ${quote(opts)}.`);
  }
  refuseUnknownKeys(where, opts, ['offset', 'limit'], {
    start: 'offset (BullMQ getJobLogs(id, start, end) is { offset: start, limit: end - start + 1 })',
    end: 'limit (BullMQ getJobLogs(id, start, end) is { offset: start, limit: end - start + 1 })',
    asc: 'nothing: lines come oldest first',
  });
  return {
    offset: int(`${where}: offset`, opts.offset, 0, 0),
    limit: int(`${where}: limit`, opts.limit, 1000, 1, 1_000_000),
  };
}
