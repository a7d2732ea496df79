// The dashboard's JSON API as the pages see it (the server side is lib/dashboard/, the contract
// DASHBOARD.md). Every read is a GET; every action a POST with a JSON body and the custom header
// the server demands, so a cross-site form cannot forge one.

import { settings } from './settings';

export type JobState = 'waiting' | 'delayed' | 'active' | 'waiting-children' | 'completed' | 'failed' | 'cancelled';
export const JOB_STATES: readonly JobState[] = [
  'waiting',
  'delayed',
  'active',
  'waiting-children',
  'completed',
  'failed',
  'cancelled',
];

export interface QueueRow {
  name: string;
  waiting: number;
  delayed: number;
  /** Parents of flows waiting for their children. */
  waitingChildren: number;
  /** Parked by job.sleep() / job.waitFor(): not in delayed. */
  sleeping?: number;
  waitingSignal?: number;
  active: number;
  stalled: number;
  failed: number;
  cancelled: number;
  paused: boolean;
  oldestWaitingAgeMs: number | null;
  registered: boolean;
  /** The app connection (database) the queue is on. */
  connection?: string;
}

export interface Overview {
  queues: QueueRow[];
  /** The app's connections (databases), the default first. */
  connections?: string[];
  throughput: { minutes: string[]; completed: number[]; failed: number[] };
  readOnly: boolean;
  now: string;
}

export interface QueueDetail {
  name: string;
  connection?: string;
  /** `delayed` leaves out the parked jobs (`sleeping`: job.sleep; `waiting-signal`: job.waitFor) the delayed list shows. */
  counts: Partial<Record<JobState | 'stalled' | 'sleeping' | 'waiting-signal', number>> & { oldestWaitingAgeMs?: number | null };
  paused: boolean;
  options: {
    concurrency?: number;
    globalConcurrency?: number | null;
    limiter?: unknown;
    deadLetterQueue?: string | null;
    defaultJobOptions?: unknown;
  } | null;
  retention: unknown;
  names: string[];
}

/** GET api/queues/:queue/groups: the busiest groups of a queue (lib/core/group-counts.ts). */
export interface QueueGroups {
  queue: string;
  connection: string;
  top: number;
  groups: { group: string; waiting: number; active: number; oldestWaitingAgeMs: number | null }[];
  other: { groups: number; waiting: number; active: number };
  complete: boolean;
  scanned: { waiting: number; active: number };
}

export interface AttemptError {
  attempt: number;
  name: string;
  message: string;
  stack?: string;
  at: string;
  worker?: string | null;
}

export interface JobSummary {
  id: string;
  queue?: string;
  name: string;
  state: JobState;
  attempt?: number;
  maxAttempts?: number;
  priority?: number;
  runAt?: string | null;
  createdAt?: string | null;
  startedAt?: string | null;
  finishedAt?: string | null;
  uniqueKey?: string | null;
  group?: string | null;
  lockedBy?: string | null;
  /** The payload's JSON, cut to a couple of hundred characters. */
  payloadPreview?: string;
  lastError?: { name: string; message: string; at?: string } | null;
}

export interface JobDetail extends Omit<JobSummary, 'payloadPreview' | 'lastError'> {
  payload: unknown;
  result?: unknown;
  errors: AttemptError[];
  timeoutMs?: number | null;
  history?: boolean;
  /** The latest job.updateProgress() value: a number or a small JSON object. */
  progress?: number | Record<string, unknown> | null;
  /** The trace recorded at enqueue (OpenTelemetry), if any. */
  traceId?: string | null;
}

/** A job linked to another in a flow (its parent, or a child). queue null: gone (pruned or removed). */
export interface FlowLink {
  id: string;
  queue: string | null;
  name: string | null;
  state: string | null;
}

/** A job's place in a flow, on its page. */
export interface JobFlow {
  parents: FlowLink[];
  /** The first 100 children by id. */
  children: FlowLink[];
  childrenTotal: number;
  childrenPending: number;
}

export interface TimelineEntry {
  at: string;
  /** created, attempt (each once: started -> ended), due, or cancelled / failed when no attempt ran. */
  event: string;
  attempt?: number | null;
  /** An attempt's start (the database's clock); null when not recorded. */
  startedAt?: string | null;
  /** An attempt's end; null while it runs. */
  endedAt?: string | null;
  durationMs?: number | null;
  /** running, error (another attempt followed), completed, failed, cancelled. */
  outcome?: string;
  node?: string | null;
  /** For an error: "Name: message". */
  error?: string;
  /** 'worker': endedAt is the worker's clock (an earlier attempt, known from its error). */
  clock?: string;
}

export interface JobPage {
  jobs: JobSummary[];
  next: string | null;
}

export interface Schedule {
  queue: string;
  /** The scheduler's id (a code-declared one: its job name). */
  id: string;
  /** The name of the jobs it enqueues. */
  name: string;
  connection?: string;
  /** The cron pattern, or null for an interval. */
  cron: string | null;
  /** The interval in ms, or null for a pattern. */
  every: number | null;
  tz: string;
  paused: boolean;
  source: 'code' | 'runtime';
  iterationCount: number;
  limit: number | null;
  next: string[];
}

export interface NodeRow {
  id: string;
  host: string;
  pid: number;
  startedAt: string;
  lastSeenAt: string;
  queues: { name: string; concurrency: number }[];
  running: number;
}

/** An answer other than 2xx, with the server's own message when it sent one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const url = (p: string): string => settings.base + '/api' + p;

async function parse<T>(res: Response): Promise<T> {
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: a proxy's error page, say
  }
  if (!res.ok) {
    const msg = body && typeof body === 'object' && 'error' in body ? String((body as { error: unknown }).error) : '';
    const fallback = res.status === 403 ? 'not allowed (403)' : `${res.status} ${res.statusText}`.trim();
    throw new ApiError(res.status, msg || fallback);
  }
  return body as T;
}

/** GET {base}/api{path}. */
export async function get<T>(path: string, signal?: AbortSignal): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url(path), { headers: { accept: 'application/json' }, credentials: 'same-origin', signal });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'the server did not answer (network error)');
  }
  return parse<T>(res);
}

/** POST {base}/api{path} with a JSON body and the dashboard's header. */
export async function post<T>(path: string, body: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url(path), {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'X-PgQueue-Dashboard': '1' },
      body: JSON.stringify(body ?? {}),
    });
  } catch {
    throw new ApiError(0, 'the server did not answer (network error)');
  }
  return parse<T>(res);
}

export const enc = encodeURIComponent;

/**
 * `{ connection }` for a request about jobs of a non-default connection (job ids are per
 * database), else nothing: a single-database app's URLs and bodies stay as they were.
 */
export const onConnection = (connection: string | null | undefined): { connection?: string } =>
  connection && connection !== 'default' ? { connection } : {};
