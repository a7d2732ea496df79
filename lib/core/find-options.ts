import type { ListKey } from './dashboard-reads';
import { PgQueueConfigError } from './errors';
import { quote } from './input-text';
import type { Job, JobState } from './job';
import { int } from './options/field-checks';
import { MAX_DELAY_MS } from './options/job-checks';
import { refuseUnknownKeys } from './options/unknown-keys';

/** Every state a job can be found in, in the order `getJobs` lists them when given several. */
export const JOB_STATES: readonly JobState[] = Object.freeze([
  'active',
  'waiting',
  'delayed',
  'waiting-children',
  'completed',
  'failed',
  'cancelled',
]);

/**
 * What `queue.getJobs()` lists: jobs of one queue in some states, a page at a time.
 * @example
 * const { jobs, next } = await queue.getJobs({ state: 'failed', name: 'welcome', limit: 100 });
 */
export interface GetJobsOptions {
  /**
   * One state to list. Give `state` or `states`, not both.
   * @default every state (see `states`)
   */
  readonly state?: JobState;
  /**
   * Several states, listed one after the other in this order: `active`, `waiting`, `delayed`,
   * `waiting-children`, `completed`, `failed`, `cancelled` (the order given does not matter).
   * @default all seven
   */
  readonly states?: readonly JobState[];
  /**
   * Only jobs of this job name.
   * @default every name
   */
  readonly name?: string;
  /**
   * The most jobs of one page, from 1 to 1000.
   * @default 100
   */
  readonly limit?: number;
  /**
   * Where the page starts: the `next` of the previous page, with the same `state`/`states` and
   * `name`. Left out, the first page.
   * @default the first page
   */
  readonly after?: string;
}

/** One page of `queue.getJobs()`. */
export interface JobPage<TPayload = unknown> {
  /** The jobs of this page: waiting and delayed ones in claim order (priority, runAt, id), the others newest first. */
  readonly jobs: Job<TPayload>[];
  /**
   * Pass it as `after` for the next page; left out when there is none. A page filtered by
   * `name` may hold fewer than `limit` jobs and still have a `next`: a page stops after a bounded
   * scan of the index, so a rare name never walks a whole history in one call.
   */
  readonly next?: string;
}

/**
 * What `queue.promoteJobs()` promotes.
 * @example
 * await queue.promoteJobs({ name: 'reminder' });
 */
export interface PromoteJobsOptions {
  /**
   * Only delayed jobs of this job name.
   * @default every delayed job of the queue
   */
  readonly name?: string;
}

/** A getJobs page's cursor, decoded: the state it continues in and the key there (null: that state's start). */
export interface PageCursor {
  readonly state: JobState;
  readonly key: ListKey | null;
}

/** getJobs's options as the store takes them. */
export interface ResolvedGetJobs {
  readonly states: JobState[];
  readonly name: string | undefined;
  readonly limit: number;
  readonly from: PageCursor | null;
}

const GET_JOBS_KEYS = ['state', 'states', 'name', 'limit', 'after'];

/** Validates getJobs's options of queue `queue`: unknown keys, states, limit, and a cursor of the same states. */
export function resolveGetJobs(queue: string, opts: GetJobsOptions | undefined): ResolvedGetJobs {
  const where = `getJobs() of queue ${quote(queue)}`;
  const o: GetJobsOptions = opts ?? {};
  if (typeof o !== 'object' || o === null || Array.isArray(o)) {
    throw new PgQueueConfigError(`${where}: expected { state | states, name?, limit?, after? }, got ${quote(opts)}.`);
  }
  refuseUnknownKeys(where, o, GET_JOBS_KEYS, { types: 'states', start: 'after', end: 'limit' });
  if (o.state !== undefined && o.states !== undefined) {
    throw new PgQueueConfigError(`${where}: pass state or states, not both.`);
  }
  let asked: readonly unknown[];
  if (o.state !== undefined) asked = [o.state];
  else if (o.states === undefined) asked = JOB_STATES;
  else if (!Array.isArray(o.states) || o.states.length === 0) {
    throw new PgQueueConfigError(`${where}: states must be a non-empty array of job states, got ${quote(o.states)}.`);
  } else asked = o.states;
  for (const s of asked) checkState(where, s);
  const states = JOB_STATES.filter((s) => asked.includes(s));
  nameFilterOf(where, o.name);
  const limit = int(`${where}: limit`, o.limit, 100, 1, 1000);
  const from = o.after === undefined ? null : decodeCursor(where, o.after);
  if (from && !states.includes(from.state)) {
    throw new PgQueueConfigError(
      `${where}: the cursor passed as after continues in state ${quote(from.state)}, which is not among the states asked. ` +
        'Pass the same state or states as for the page it came from.',
    );
  }
  return { states, name: o.name, limit, from };
}

/** Validates getJobCounts's states; none means all seven. */
export function resolveCountStates(queue: string, states: readonly unknown[]): JobState[] {
  const where = `getJobCounts() of queue ${quote(queue)}`;
  for (const s of states) checkState(where, s);
  return states.length ? JOB_STATES.filter((s) => states.includes(s)) : [...JOB_STATES];
}

/** Validates promoteJobs's options. */
export function resolvePromoteJobs(queue: string, opts: PromoteJobsOptions | undefined): { name: string | null } {
  const where = `promoteJobs() of queue ${quote(queue)}`;
  if (opts === undefined) return { name: null };
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) {
    throw new PgQueueConfigError(`${where}: expected { name? }, got ${quote(opts)}.`);
  }
  refuseUnknownKeys(where, opts, ['name'], { count: 'nothing: every delayed job (of name) is promoted, in batches' });
  return { name: nameFilterOf(where, opts.name) };
}

/**
 * The job-name filter of a find or a change of many jobs (getJobs, promoteJobs, retryJobs,
 * removeJobs, cancelJobs): null for any name, else a non-empty string.
 */
export function nameFilterOf(where: string, name: unknown): string | null {
  if (name === undefined) return null;
  if (typeof name !== 'string' || name === '') {
    throw new PgQueueConfigError(`${where}: name must be a job name (a non-empty string), got ${quote(name)}.`);
  }
  return name;
}

/** Validates getJobByKey's key. */
export function resolveUniqueKey(queue: string, uniqueKey: unknown): string {
  if (typeof uniqueKey !== 'string' || uniqueKey === '') {
    throw new PgQueueConfigError(
      `getJobByKey() of queue ${quote(queue)}: uniqueKey must be a non-empty string, got ${quote(uniqueKey)}.`,
    );
  }
  return uniqueKey;
}

/** Validates changePriority's priority (a 32-bit integer, as add's). */
export function resolvePriority(queue: string, priority: unknown): number {
  return int(`changePriority() of queue ${quote(queue)}: priority`, priority, 0, -(2 ** 31));
}

/** Validates changeDelay's delay, rounded to whole milliseconds. */
export function resolveDelayMs(queue: string, delayMs: unknown): number {
  if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
    throw new PgQueueConfigError(
      `changeDelay() of queue ${quote(queue)}: delayMs must be a number of milliseconds from 0 to ${MAX_DELAY_MS}, got ${quote(delayMs)}.`,
    );
  }
  return Math.round(delayMs);
}

function checkState(where: string, s: unknown): asserts s is JobState {
  if (!JOB_STATES.includes(s as JobState)) {
    const hint =
      s === 'wait' ? " (BullMQ's 'wait' is 'waiting' here)" : s === 'paused' ? ' (a paused queue keeps its jobs waiting)' : '';
    throw new PgQueueConfigError(`${where}: unknown job state ${quote(s)}${hint}. Use one of ${JOB_STATES.join(', ')}.`);
  }
}

/** A page cursor as the opaque text `next` carries (base64url of its JSON). */
export function encodeCursor(c: PageCursor): string {
  return Buffer.from(JSON.stringify([c.state, c.key]), 'utf8').toString('base64url');
}

function decodeCursor(where: string, text: unknown): PageCursor {
  const bad = (): never => {
    throw new PgQueueConfigError(`${where}: after must be the next of a previous page, unchanged; got ${quote(text)}.`);
  };
  if (typeof text !== 'string') return bad();
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return bad();
  }
  if (!Array.isArray(v) || v.length !== 2 || !JOB_STATES.includes(v[0] as JobState)) return bad();
  const [state, key] = v as [JobState, unknown];
  if (key === null) return { state, key: null };
  if (typeof key !== 'object' || !/^\d{1,19}$/.test(String((key as { id?: unknown }).id))) return bad();
  const k = key as { id: string; priority?: unknown; runAt?: unknown };
  if (k.priority === undefined && k.runAt === undefined) return { state, key: { id: String(k.id) } };
  if (!Number.isInteger(k.priority) || typeof k.runAt !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$/.test(k.runAt)) {
    return bad();
  }
  return { state, key: { priority: k.priority as number, runAt: k.runAt, id: String(k.id) } };
}

/** The key of getDeduplicationJobId / removeDeduplicationKey: a non-empty string. */
export function resolveDeduplicationKey(queue: string, key: unknown): string {
  if (typeof key !== 'string' || key === '') {
    throw new PgQueueConfigError(`Deduplication key of queue ${quote(queue)}: must be a non-empty string, got ${quote(key)}.`);
  }
  return key;
}
