import type { ListState } from '../core/dashboard-reads';
import { MAX_CLEAN_AGE_MS, type CleanState } from '../core/clean';
import { body, DashboardInputError, one, STATES } from './dashboard-input';

// Validation of the operator actions' requests (search, counts, clean, drain, promote, actions
// over every job matching a filter): pure, as dashboard-input.ts, whose helpers it shares.

/** The longest text the search box takes (an id, or a unique key). */
export const MAX_SEARCH_LENGTH = 1000;

/** `?q=`: an id or a unique key, as typed (surrounding blanks dropped). */
export function parseSearchQuery(query: Record<string, unknown>): string {
  const unknown = Object.keys(query).filter((k) => k !== 'q');
  if (unknown.length) throw new DashboardInputError(`Unknown query parameter(s) ${unknown.join(', ')}; known: q.`);
  const q = (one(query, 'q') ?? '').trim();
  if (q === '' || q.length > MAX_SEARCH_LENGTH)
    throw new DashboardInputError(
      `Query parameter "q" must be a job id or a unique key of 1 to ${MAX_SEARCH_LENGTH} characters, for example ?q=42 or ?q=invoice:7.`,
    );
  return q;
}

const FINISHED: readonly CleanState[] = ['completed', 'failed', 'cancelled'];

function stateOf(v: unknown, allowed: readonly ListState[], what: string): ListState {
  if (typeof v !== 'string' || !allowed.includes(v as ListState))
    throw new DashboardInputError(`${what} must be one of ${allowed.join(', ')} (got ${JSON.stringify(v ?? null)}).`);
  return v as ListState;
}

function nameOf(v: unknown): string | null {
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string' || v.length > 200)
    throw new DashboardInputError('"name" must be a job name (a string of at most 200 characters).');
  return v;
}

function ageOf(v: unknown, what: string): number {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || n > MAX_CLEAN_AGE_MS)
    throw new DashboardInputError(
      `${what} must be a whole number of milliseconds from 0 to ${MAX_CLEAN_AGE_MS} (0: every job of that state), got ${JSON.stringify(v ?? null)}.`,
    );
  return n;
}

/** What a count route and an action over matching jobs name: a state, a job name, an age. */
export interface MatchFilter {
  readonly state: ListState;
  readonly name: string | null;
  /** Finished states only: finished more than this many ms ago. */
  readonly olderThanMs: number | null;
}

/** `GET api/queues/:queue/count?state=&name=&olderThanMs=`. */
export function parseCountQuery(query: Record<string, unknown>): MatchFilter {
  const known = ['state', 'name', 'olderThanMs'];
  const unknown = Object.keys(query).filter((k) => !known.includes(k));
  if (unknown.length)
    throw new DashboardInputError(`Unknown query parameter(s) ${unknown.join(', ')}; known: ${known.join(', ')}.`);
  const state = stateOf(one(query, 'state'), STATES, 'Query parameter "state"');
  const name = nameOf(one(query, 'name'));
  const ageRaw = one(query, 'olderThanMs');
  if (ageRaw !== undefined && ageRaw !== '' && !FINISHED.includes(state as CleanState))
    throw new DashboardInputError(`olderThanMs counts finished jobs only (${FINISHED.join(', ')}), not ${state} ones.`);
  const olderThanMs = ageRaw === undefined || ageRaw === '' ? null : ageOf(ageRaw, 'olderThanMs');
  return { state, name, olderThanMs };
}

/** `{ state, olderThanMs, limit? }` of clean: finished jobs older than an age. */
export function parseCleanBody(b: unknown): { state: CleanState; olderThanMs: number; limit?: number } {
  const o = body(b, ['state', 'olderThanMs', 'limit']);
  const state = stateOf(o.state, FINISHED, '"state"') as CleanState;
  const olderThanMs = ageOf(o.olderThanMs, '"olderThanMs"');
  if (o.limit === undefined || o.limit === null) return { state, olderThanMs };
  if (typeof o.limit !== 'number' || !Number.isSafeInteger(o.limit) || o.limit < 1)
    throw new DashboardInputError(
      `"limit" must be a whole number of at least 1 (or left out: no limit), got ${JSON.stringify(o.limit)}.`,
    );
  return { state, olderThanMs, limit: o.limit };
}

/** `{ name? }` of promote-all. */
export function parseNameBody(b: unknown): string | null {
  return nameOf(body(b ?? {}, ['name']).name);
}

/** `{ globalConcurrency }` of global-concurrency: a whole number from 1, or null to remove the stored value. */
export function parseGlobalConcurrencyBody(b: unknown): number | null {
  const v = body(b, ['globalConcurrency']).globalConcurrency;
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 2 ** 31 - 1)
    throw new DashboardInputError(
      `"globalConcurrency" must be a whole number from 1 to 2147483647, or null to remove the stored value, got ${JSON.stringify(v) ?? 'nothing'}.`,
    );
  return v;
}

/** A node id of the registry as a route names it (`host:pid:random`): printable, at most 300 characters. */
export function parseNodeId(id: string): string {
  if (typeof id !== 'string' || !/^[\x21-\x7e]{1,300}$/.test(id))
    throw new DashboardInputError(
      `Not a node id: ${JSON.stringify(id)}. Use the "id" of a node of GET api/queues/:queue/concurrency.`,
    );
  return id;
}

/** `{ concurrency }` of a node's concurrency: a whole number from 1 to 1000 (registerQueue's bounds). */
export function parseNodeConcurrencyBody(b: unknown): number {
  const v = body(b, ['concurrency']).concurrency;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 1000)
    throw new DashboardInputError(`"concurrency" must be a whole number from 1 to 1000, got ${JSON.stringify(v) ?? 'nothing'}.`);
  return v;
}

/** The actions over every job matching a filter, and the states each takes (what the call it runs takes). */
export const MATCHING_STATES = {
  retry: ['completed', 'failed', 'cancelled'],
  remove: ['waiting', 'delayed', 'waiting-children', 'completed', 'failed', 'cancelled'],
  cancel: ['waiting', 'delayed', 'waiting-children', 'active'],
} as const satisfies Record<string, readonly ListState[]>;

export type MatchingAction = keyof typeof MATCHING_STATES;

/** `{ state, name? }` of retry-matching, remove-matching and cancel-matching. */
export function parseMatchingBody(action: MatchingAction, b: unknown): { state: ListState; name: string | null } {
  const o = body(b, ['state', 'name']);
  return { state: stateOf(o.state, MATCHING_STATES[action], `"state" of ${action}-matching`), name: nameOf(o.name) };
}

/** A job scheduler's id from the path: 1 to 200 characters (the upsert's limit). */
export function parseSchedulerId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 200) {
    throw new DashboardInputError('The job scheduler id must be a string of 1 to 200 characters.');
  }
  return id;
}
