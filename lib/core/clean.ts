import { PgQueueConfigError } from './errors';
import { quote } from './input-text';
import { bool, int } from './options/field-checks';
import { refuseUnknownKeys } from './options/unknown-keys';

/** The finished states `queue.clean()` removes from history. */
export type CleanState = 'completed' | 'failed' | 'cancelled';

/** What `queue.clean()` removes: finished jobs of one state, older than an age. BullMQ's `clean(grace, limit, type)`. */
export interface CleanOptions {
  /** The finished state whose jobs are removed from history. */
  readonly state: CleanState;
  /** Only jobs that finished more than this many milliseconds ago (BullMQ's `grace`); 0: all of that state. */
  readonly olderThanMs: number;
  /**
   * At most this many jobs are removed; left out, every job that matches.
   * @default no limit
   */
  readonly limit?: number;
}

/** How `queue.obliterate()` treats running jobs. */
export interface ObliterateOptions {
  /**
   * Remove the queue's running jobs too, instead of refusing while there are any: their handlers
   * see LeaseLostError at their next heartbeat, and what they return is dropped.
   * @default false
   */
  readonly force?: boolean;
}

/** The longest age `olderThanMs` takes: a hundred years (older would not be a timestamp). */
export const MAX_CLEAN_AGE_MS = 100 * 365 * 24 * 3600 * 1000;
const CLEAN_STATES: readonly CleanState[] = ['completed', 'failed', 'cancelled'];

/** clean()'s options, checked: unknown keys, a state, an age, a limit (null: none). */
export function resolveCleanOptions(o: unknown): { state: CleanState; olderThanMs: number; limit: number | null } {
  if (typeof o !== 'object' || o === null || Array.isArray(o)) {
    throw new PgQueueConfigError(
      `queue.clean() takes { state, olderThanMs, limit? }, got ${quote(o)}. ` +
        "Example: queue.clean({ state: 'completed', olderThanMs: 86_400_000 }).",
    );
  }
  refuseUnknownKeys('queue.clean()', o, ['state', 'olderThanMs', 'limit'], {
    grace: 'olderThanMs (milliseconds)',
    type: "state ('completed', 'failed' or 'cancelled')",
  });
  const { state, olderThanMs, limit } = o as Record<string, unknown>;
  if (state === undefined || olderThanMs === undefined) {
    throw new PgQueueConfigError(
      `queue.clean() needs ${state === undefined ? "state ('completed', 'failed' or 'cancelled')" : ''}` +
        `${state === undefined && olderThanMs === undefined ? ' and ' : ''}` +
        `${olderThanMs === undefined ? 'olderThanMs (0 for every job of that state)' : ''}.`,
    );
  }
  if (!CLEAN_STATES.includes(state as CleanState)) {
    throw new PgQueueConfigError(
      `Invalid queue.clean() state: ${quote(state)}. Use 'completed', 'failed' or 'cancelled' (waiting and delayed jobs: queue.drain()).`,
    );
  }
  return {
    state: state as CleanState,
    olderThanMs: int('queue.clean() olderThanMs', olderThanMs, 0, 0, MAX_CLEAN_AGE_MS),
    limit: limit === undefined ? null : int('queue.clean() limit', limit, 0, 1, Number.MAX_SAFE_INTEGER),
  };
}

/** obliterate()'s options, checked. */
export function resolveObliterateOptions(o: unknown): { force: boolean } {
  if (o === undefined) return { force: false };
  if (typeof o !== 'object' || o === null || Array.isArray(o)) {
    throw new PgQueueConfigError(`queue.obliterate() takes { force? } or nothing, got ${quote(o)}.`);
  }
  refuseUnknownKeys('queue.obliterate()', o, ['force'], {
    count: 'nothing: every job of the queue is removed, a batch at a time',
  });
  return { force: bool('queue.obliterate() force', (o as Record<string, unknown>).force, false) };
}
