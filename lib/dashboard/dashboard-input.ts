import { PgQueueConfigError } from '../core/errors';
import type { ListFilters, ListKey, ListState } from '../core/dashboard-reads';
import { isJobId, validateQueueName } from '../core/names';

/**
 * Validation of everything a dashboard request carries (query strings, path parameters, JSON
 * bodies): pure, so the messages are unit-testable; the controller turns a DashboardInputError
 * into a 400 with `{ error: message }`.
 */
export class DashboardInputError extends PgQueueConfigError {}

export const STATES: readonly ListState[] = [
  'waiting',
  'delayed',
  'active',
  'waiting-children',
  'completed',
  'failed',
  'cancelled',
];
/** The most ids one action takes. */
export const MAX_IDS = 1000;
export const MAX_LIMIT = 200;
export const DEFAULT_LIMIT = 50;

export function one(query: Record<string, unknown>, key: string): string | undefined {
  const v = query[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string')
    throw new DashboardInputError(`Query parameter "${key}" was given more than once (or as an object); pass it once.`);
  return v;
}

export function parseQueue(name: unknown): string {
  try {
    return validateQueueName(name);
  } catch (err) {
    throw new DashboardInputError((err as Error).message);
  }
}

const MAX_BIGINT = 9223372036854775807n;

/** A bigint id PostgreSQL accepts: digits, at most 2^63 - 1 (a longer one failed the statement: 500). */
function inBigintRange(id: string): boolean {
  return isJobId(id) && id.length <= 19 && BigInt(id) <= MAX_BIGINT;
}

export function parseJobId(id: unknown): string {
  if (typeof id !== 'string' || !inBigintRange(id) || BigInt(id) === 0n) {
    throw new DashboardInputError(`Job id ${JSON.stringify(id)} is not valid: a job id is a positive integer such as "42".`);
  }
  return id;
}

/** An opaque cursor: base64url of the list key. */
export function encodeCursor(key: ListKey): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

const RUN_AT_KEY_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}$/;

/**
 * A cursor's run_at as the database wrote it: a real UTC time (the shape alone let
 * "2024-13-45T25:00:00.000000" through, which PostgreSQL then refused: a 500).
 */
function isRunAtKey(v: unknown): v is string {
  const m = typeof v === 'string' ? RUN_AT_KEY_RE.exec(v) : null;
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number);
  const t = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  return (
    y >= 1 &&
    t.getUTCFullYear() === y &&
    t.getUTCMonth() === mo - 1 &&
    t.getUTCDate() === d &&
    t.getUTCHours() === h &&
    t.getUTCMinutes() === mi &&
    t.getUTCSeconds() === s
  );
}

export function decodeCursor(raw: string, state: ListState): ListKey {
  const bad = () =>
    new DashboardInputError(
      `Cursor "before" is not valid for state "${state}": pass the "next" value of the previous page unchanged (or leave it out for the first page).`,
    );
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(raw)) throw bad();
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (typeof v !== 'object' || v === null) throw bad();
  const k = v as Record<string, unknown>;
  if (typeof k.id !== 'string' || !inBigintRange(k.id)) throw bad();
  if (state === 'waiting' || state === 'delayed') {
    if (!Number.isInteger(k.priority) || Math.abs(k.priority as number) > 2147483647 || !isRunAtKey(k.runAt)) throw bad();
    if (Object.keys(k).length !== 3) throw bad();
    return { priority: k.priority as number, runAt: k.runAt, id: k.id };
  }
  if (Object.keys(k).length !== 1) throw bad();
  return { id: k.id };
}

/** The parsed query of `GET api/queues/:queue/jobs`. */
export interface JobListQuery {
  readonly state: ListState;
  readonly filters: ListFilters;
  readonly cursor: ListKey | null;
  readonly limit: number;
  /** Find one job by id (in this queue, any state): the other filters do not apply. */
  readonly id: string | null;
}

const LIST_KEYS = ['state', 'name', 'uniqueKey', 'payload', 'group', 'before', 'limit', 'id'];

export function parseJobListQuery(query: Record<string, unknown>): JobListQuery {
  const unknown = Object.keys(query).filter((k) => !LIST_KEYS.includes(k));
  if (unknown.length)
    throw new DashboardInputError(`Unknown query parameter(s) ${unknown.join(', ')}; known: ${LIST_KEYS.join(', ')}.`);
  const idRaw = one(query, 'id');
  const id = idRaw === undefined || idRaw === '' ? null : parseJobId(idRaw);
  const stateRaw = one(query, 'state');
  if (stateRaw === undefined && id === null)
    throw new DashboardInputError(`Query parameter "state" is required: one of ${STATES.join(', ')}.`);
  if (stateRaw !== undefined && !STATES.includes(stateRaw as ListState)) {
    throw new DashboardInputError(`State ${JSON.stringify(stateRaw)} is not one of ${STATES.join(', ')}.`);
  }
  const state = (stateRaw ?? 'waiting') as ListState;
  const limitRaw = one(query, 'limit');
  let limit = DEFAULT_LIMIT;
  if (limitRaw !== undefined) {
    limit = Number(limitRaw);
    if (!/^\d+$/.test(limitRaw) || limit < 1 || limit > MAX_LIMIT)
      throw new DashboardInputError(`limit must be an integer from 1 to ${MAX_LIMIT} (got ${JSON.stringify(limitRaw)}).`);
  }
  const filters: { name?: string; uniqueKey?: string; payloadJson?: string; group?: string } = {};
  const name = one(query, 'name');
  if (name !== undefined && name !== '') {
    if (name.length > 200) throw new DashboardInputError('name must be at most 200 characters.');
    filters.name = name;
  }
  const group = one(query, 'group');
  if (group !== undefined && group !== '') {
    if (group.length > 200) throw new DashboardInputError("group must be at most 200 characters (a job's group, exactly).");
    filters.group = group;
  }
  const uniqueKey = one(query, 'uniqueKey');
  if (uniqueKey !== undefined && uniqueKey !== '') {
    if (!(state === 'waiting' || state === 'delayed' || state === 'active' || state === 'waiting-children')) {
      throw new DashboardInputError(
        'uniqueKey finds live jobs only (waiting, delayed, active or waiting-children): finished jobs do not keep their key.',
      );
    }
    filters.uniqueKey = uniqueKey;
  }
  const payload = one(query, 'payload');
  if (payload !== undefined && payload !== '') {
    let v: unknown;
    try {
      v = JSON.parse(payload);
    } catch (err) {
      throw new DashboardInputError(
        `payload must be JSON to match by containment, for example {"orderId":42} (${(err as Error).message}).`,
      );
    }
    if (typeof v !== 'object' || v === null)
      throw new DashboardInputError('payload must be a JSON object or array, for example {"orderId":42}.');
    if (payload.length > 10_000) throw new DashboardInputError('payload filter must be at most 10000 characters.');
    filters.payloadJson = JSON.stringify(v);
  }
  const before = one(query, 'before');
  const cursor = before === undefined || before === '' ? null : decodeCursor(before, state);
  return { state, filters, cursor, limit, id };
}

export function body(b: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (typeof b !== 'object' || b === null || Array.isArray(b))
    throw new DashboardInputError('The request body must be a JSON object.');
  const unknown = Object.keys(b).filter((k) => !allowed.includes(k));
  if (unknown.length)
    throw new DashboardInputError(
      `Unknown field(s) ${unknown.join(', ')} in the body; known: ${allowed.length ? allowed.join(', ') : '(none)'}.`,
    );
  return b as Record<string, unknown>;
}

/**
 * The `connection` of a job action's body or a job's URL (`?connection=`): whose database the
 * ids are of, when the app has more than one (ids are per database). Null when left out.
 */
export function parseConnection(value: unknown): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || !/^[A-Za-z][A-Za-z0-9_-]{0,62}$/.test(value))
    throw new DashboardInputError('"connection" must be the name of one of the app\'s connections, for example "bulk".');
  return value;
}

/** Which lines of a job's log the job page reads (`GET api/jobs/:id/logs?offset=&limit=&connection=`). */
export function parseLogsQuery(query: Record<string, unknown>): { offset: number; limit: number; connection: string | null } {
  const known = ['offset', 'limit', 'connection'];
  const unknown = Object.keys(query).filter((k) => !known.includes(k));
  if (unknown.length)
    throw new DashboardInputError(`Unknown query parameter(s) ${unknown.join(', ')}; known: ${known.join(', ')}.`);
  const num = (key: string, fallback: number, min: number, max: number): number => {
    const raw = one(query, key);
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max)
      throw new DashboardInputError(`${key} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)}).`);
    return n;
  };
  return {
    offset: num('offset', 0, 0, 1_000_000),
    limit: num('limit', 200, 1, 1000),
    connection: parseConnection(query.connection),
  };
}

/** The `connection` of an ids body (`{ ids, connection? }`). */
export function parseIdsConnection(b: unknown): string | null {
  return parseConnection(body(b, ['ids', 'connection']).connection);
}

/** `{ ids: string[], connection? }`: 1 to MAX_IDS job ids, duplicates dropped. */
export function parseIdsBody(b: unknown): string[] {
  const { ids } = body(b, ['ids', 'connection']);
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_IDS) {
    throw new DashboardInputError(`The body needs "ids": an array of 1 to ${MAX_IDS} job ids, for example {"ids":["42"]}.`);
  }
  return [...new Set(ids.map((id) => parseJobId(typeof id === 'number' && Number.isSafeInteger(id) ? String(id) : id)))];
}

/** `{ name?: string }` of retry-failed. */
export function parseRetryFailedBody(b: unknown): string | null {
  const { name } = body(b ?? {}, ['name']);
  if (name === undefined || name === null) return null;
  if (typeof name !== 'string' || name.length === 0 || name.length > 200)
    throw new DashboardInputError('"name" must be a job name (a non-empty string of at most 200 characters).');
  return name;
}

/** `{}` of pause and resume. */
export function parseEmptyBody(b: unknown): void {
  body(b ?? {}, []);
}

const JOB_OPTION_KEYS = ['delayMs', 'runAt', 'priority', 'attempts', 'backoff', 'timeoutMs', 'uniqueKey', 'replaceWaiting'];

/** `{ name, payload, options? }` of enqueue; the queue's add() validates the rest. */
export function parseEnqueueBody(b: unknown): { name: string; payload: unknown; options: Record<string, unknown> } {
  const o = body(b, ['name', 'payload', 'options']);
  if (typeof o.name !== 'string')
    throw new DashboardInputError('The body needs "name": the job name, for example {"name":"send","payload":{}}.');
  if (!('payload' in o))
    throw new DashboardInputError(
      'The body needs "payload" (any JSON value), for example {"name":"send","payload":{"to":"a@b.c"}}.',
    );
  const options = o.options === undefined ? {} : o.options;
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw new DashboardInputError('"options" must be an object of job options.');
  const unknown = Object.keys(options).filter((k) => !JOB_OPTION_KEYS.includes(k));
  if (unknown.length)
    throw new DashboardInputError(`Unknown job option(s) ${unknown.join(', ')}; known: ${JOB_OPTION_KEYS.join(', ')}.`);
  const out: Record<string, unknown> = { ...options };
  if (typeof out.runAt === 'string') {
    const d = new Date(out.runAt);
    if (Number.isNaN(d.getTime()))
      throw new DashboardInputError(
        `options.runAt ${JSON.stringify(out.runAt)} is not a date: use ISO 8601, for example "2030-01-01T00:00:00Z".`,
      );
    out.runAt = d;
  }
  return { name: o.name, payload: o.payload, options: out };
}
