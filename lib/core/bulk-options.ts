import { PgQueueConfigError } from './errors';
import { nameFilterOf } from './find-options';
import { quote } from './input-text';
import { isJobId } from './names';
import { refuseUnknownKeys } from './options/unknown-keys';

/** The finished states `queue.retryJobs()` runs again. */
export type RetryJobsState = 'failed' | 'cancelled' | 'completed';

/** The states `queue.removeJobs()` removes from: every state but `active` (a running job is never removed). */
export type RemoveJobsState = 'waiting' | 'delayed' | 'waiting-children' | 'completed' | 'failed' | 'cancelled';

/** The live states `queue.cancelJobs()` cancels. */
export type CancelJobsState = 'waiting' | 'delayed' | 'waiting-children' | 'active';

/**
 * Which finished jobs `queue.retryJobs()` runs again. BullMQ's `retryJobs({ state, timestamp })`.
 * @example await queue.retryJobs({ state: 'failed', name: 'welcome' });
 */
export interface RetryJobsOptions {
  /** The finished state whose jobs run again: `failed`, `cancelled` or `completed` (as Bull Board's retry). */
  readonly state: RetryJobsState;
  /**
   * Only jobs of this job name.
   * @default every name
   */
  readonly name?: string;
  /**
   * Only jobs that finished before this time (a Date, or milliseconds since the epoch: BullMQ's `timestamp`).
   * @default any time
   */
  readonly finishedBefore?: Date | number;
}

/**
 * What `queue.removeJobs()` removes: jobs by `ids`, or every job in `state`/`states` (of one job
 * `name`, finished before a time): never a running one. Give `ids` alone, or a state. BullMQ
 * removes one job at a time (`job.remove()`) or by state with `clean()` and `drain()`.
 * @example await queue.removeJobs({ state: 'failed', name: 'welcome', finishedBefore: Date.now() - 7 * 86_400_000 });
 */
export interface RemoveJobsOptions {
  /**
   * These jobs (waiting, delayed, waiting on children, or finished), in your transaction when one
   * is passed. Alone: no other option goes with it.
   * @default none: give ids, state or states
   */
  readonly ids?: readonly string[];
  /**
   * One state to remove jobs from.
   * @default none: give ids, state or states
   */
  readonly state?: RemoveJobsState;
  /**
   * Several states (`{ states: [...all six] }` to empty a queue of all but its running jobs).
   * @default none: give ids, state or states
   */
  readonly states?: readonly RemoveJobsState[];
  /**
   * Only jobs of this job name.
   * @default every name
   */
  readonly name?: string;
  /**
   * Only jobs that finished before this time (a Date, or milliseconds since the epoch); with
   * finished states only (`completed`, `failed`, `cancelled`).
   * @default any time
   */
  readonly finishedBefore?: Date | number;
}

/**
 * What `queue.cancelJobs()` cancels: jobs by `ids`, or every live job in `state`/`states` (of one
 * job `name`). Waiting ones end cancelled at once; running ones are signalled, as `cancel(id)`
 * does. Give `ids` alone, or a state.
 * @example await queue.cancelJobs({ states: ['waiting', 'delayed'], name: 'newsletter' });
 */
export interface CancelJobsOptions {
  /**
   * These jobs, in your transaction when one is passed. Alone: no other option goes with it.
   * @default none: give ids, state or states
   */
  readonly ids?: readonly string[];
  /**
   * One state to cancel jobs in.
   * @default none: give ids, state or states
   */
  readonly state?: CancelJobsState;
  /**
   * Several states (`{ states: ['waiting', 'delayed', 'waiting-children', 'active'] }`: every live job).
   * @default none: give ids, state or states
   */
  readonly states?: readonly CancelJobsState[];
  /**
   * Only jobs of this job name.
   * @default every name
   */
  readonly name?: string;
}

/** A checked filter: its states, a job name (null: any), finished before (null: any time). */
export interface ResolvedFilter<S extends string> {
  readonly states: readonly S[];
  readonly name: string | null;
  readonly finishedBefore: Date | null;
}

/** A checked ids-or-filter argument. */
export type ResolvedSelection<S extends string> = { readonly ids: string[] } | { readonly filter: ResolvedFilter<S> };

const RETRY_STATES: readonly RetryJobsState[] = ['failed', 'cancelled', 'completed'];
const REMOVE_STATES: readonly RemoveJobsState[] = ['waiting', 'delayed', 'waiting-children', 'completed', 'failed', 'cancelled'];
const CANCEL_STATES: readonly CancelJobsState[] = ['waiting', 'delayed', 'waiting-children', 'active'];
const FINISHED: readonly string[] = ['completed', 'failed', 'cancelled'];
const BULLMQ_KEYS = {
  count: 'nothing: every matching job is changed, a thousand per statement',
  timestamp: 'finishedBefore (a Date or epoch milliseconds)',
  type: 'state',
  types: 'states',
};

function objectArg(where: string, o: unknown, shape: string): Record<string, unknown> {
  if (typeof o !== 'object' || o === null || Array.isArray(o)) {
    throw new PgQueueConfigError(`${where} takes ${shape}, got ${quote(o)}.`);
  }
  return o as Record<string, unknown>;
}

function timeOf(where: string, t: unknown): Date | null {
  if (t === undefined) return null;
  const d = t instanceof Date ? t : typeof t === 'number' ? new Date(t) : null;
  if (d === null || Number.isNaN(d.getTime())) {
    throw new PgQueueConfigError(`${where}: finishedBefore must be a Date or epoch milliseconds, got ${quote(t)}.`);
  }
  return d;
}

function statesOf<S extends string>(where: string, o: Record<string, unknown>, allowed: readonly S[], hint: string): S[] {
  const { state, states } = o;
  if (state !== undefined && states !== undefined) throw new PgQueueConfigError(`${where}: give state or states, not both.`);
  if (state === undefined && states === undefined) {
    throw new PgQueueConfigError(
      `${where} needs state or states (${allowed.map((s) => quote(s)).join(', ')}): a call over every job of ` +
        `a queue names the states it means, e.g. { states: [${allowed.map((s) => quote(s)).join(', ')}] }.`,
    );
  }
  const list = state !== undefined ? [state] : states;
  if (!Array.isArray(list) || list.length === 0) {
    throw new PgQueueConfigError(`${where}: states must be a non-empty array, got ${quote(states)}.`);
  }
  for (const s of list) {
    if (!allowed.includes(s as S)) {
      throw new PgQueueConfigError(`${where}: invalid state ${quote(s)}. Use ${allowed.map((a) => quote(a)).join(', ')}${hint}.`);
    }
  }
  return [...new Set(list as S[])];
}

function idsOf(where: string, ids: unknown): string[] {
  if (!Array.isArray(ids)) throw new PgQueueConfigError(`${where}: ids must be an array of job ids, got ${quote(ids)}.`);
  const out = new Set<string>();
  for (const id of ids) {
    if (typeof id !== 'string' || !isJobId(id)) {
      throw new PgQueueConfigError(
        `${where}: ${quote(id)} is not a job id (a job's id is the decimal text of a positive integer).`,
      );
    }
    out.add(id);
  }
  return [...out];
}

/** retryJobs()'s options, checked. */
export function resolveRetryJobs(queue: string, opts: unknown): ResolvedFilter<RetryJobsState> & { state: RetryJobsState } {
  const where = `retryJobs() of queue ${quote(queue)}`;
  const o = objectArg(
    where,
    opts === undefined ? {} : opts,
    "{ state: 'failed' | 'cancelled' | 'completed', name?, finishedBefore? }",
  );
  refuseUnknownKeys(where, o, ['state', 'name', 'finishedBefore'], BULLMQ_KEYS);
  const [state] = statesOf(
    where,
    { state: o.state },
    RETRY_STATES,
    ' (waiting jobs are not retried; failed is what BullMQ retries by default)',
  );
  return { state, states: [state], name: nameFilterOf(where, o.name), finishedBefore: timeOf(where, o.finishedBefore) };
}

/** removeJobs()'s argument, checked: ids, or a filter with its states. */
export function resolveRemoveJobs(queue: string, opts: unknown): ResolvedSelection<RemoveJobsState> {
  const where = `removeJobs() of queue ${quote(queue)}`;
  const o = objectArg(where, opts, '{ ids } or { state | states, name?, finishedBefore? }');
  if ('ids' in o) {
    refuseUnknownKeys(`${where} (by ids)`, o, ['ids']);
    return { ids: idsOf(where, o.ids) };
  }
  refuseUnknownKeys(where, o, ['state', 'states', 'name', 'finishedBefore'], BULLMQ_KEYS);
  const states = statesOf(where, o, REMOVE_STATES, ' (a running job is never removed: cancelJobs() it first)');
  const finishedBefore = timeOf(where, o.finishedBefore);
  if (finishedBefore && states.some((s) => !FINISHED.includes(s))) {
    throw new PgQueueConfigError(`${where}: finishedBefore applies to finished states only (completed, failed, cancelled).`);
  }
  return { filter: { states, name: nameFilterOf(where, o.name), finishedBefore } };
}

/** cancelJobs()'s argument, checked: ids, or a filter with its states. */
export function resolveCancelJobs(queue: string, opts: unknown): ResolvedSelection<CancelJobsState> {
  const where = `cancelJobs() of queue ${quote(queue)}`;
  const o = objectArg(where, opts, '{ ids } or { state | states, name? }');
  if ('ids' in o) {
    refuseUnknownKeys(`${where} (by ids)`, o, ['ids']);
    return { ids: idsOf(where, o.ids) };
  }
  refuseUnknownKeys(where, o, ['state', 'states', 'name'], BULLMQ_KEYS);
  const states = statesOf(where, o, CANCEL_STATES, ' (a finished job is not cancelled: removeJobs() it)');
  return { filter: { states, name: nameFilterOf(where, o.name), finishedBefore: null } };
}
