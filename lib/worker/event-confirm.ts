import type { Job, JobAttemptError } from '../core/job';
import { QUEUE_EVENT_KINDS, type QueueEventKind, type QueueEventMap } from '../core/queue-events';
import { rowToJob } from '../db/job-row';
import type { ConfirmRow } from '../db/events';

/** One entry of a notification: `kind` happened to job `id` of `queue` on `attempt`. */
export interface EventHint {
  readonly kind: QueueEventKind;
  readonly queue: string;
  readonly id: string;
  readonly attempt: number;
}

/** A job id as the statements publish it: a positive bigint in decimal. */
const JOB_ID = /^[1-9][0-9]{0,18}$/;
const KINDS = new Set<string>(QUEUE_EVENT_KINDS);

/**
 * The entries of one notification (`kind|queue|id.attempt,id.attempt`), or [] when it is not one
 * of ours. Anything may arrive here (any role that can connect may NOTIFY the channel): malformed
 * entries are skipped, never thrown on. The queue sits between the first and the last `|`, so a
 * queue name holding `|` still parses.
 */
export function parseEventPayload(payload: string): EventHint[] {
  const first = payload.indexOf('|');
  const last = payload.lastIndexOf('|');
  if (first <= 0 || last === first) return [];
  const kind = payload.slice(0, first);
  if (!KINDS.has(kind)) return [];
  const queue = payload.slice(first + 1, last);
  const out: EventHint[] = [];
  for (const entry of payload.slice(last + 1).split(',')) {
    const dot = entry.indexOf('.');
    const id = dot < 0 ? '' : entry.slice(0, dot);
    const attempt = Number(entry.slice(dot + 1));
    if (!JOB_ID.test(id) || !Number.isSafeInteger(attempt) || attempt < 0) continue;
    out.push({ kind: kind as QueueEventKind, queue, id, attempt });
  }
  return out;
}

/** A confirmed event, ready to fire. */
export type ConfirmedEvent = {
  [K in QueueEventKind]: { readonly event: K; readonly queue: string; readonly id: string; readonly args: QueueEventMap[K] };
}[QueueEventKind];

/** The error of `attempt` in a row's errors, the last such if several. */
function errorOf(errors: readonly JobAttemptError[] | null, attempt: number): JobAttemptError | undefined {
  if (!errors) return undefined;
  for (let i = errors.length - 1; i >= 0; i--) if (errors[i]?.attempt === attempt) return errors[i];
  return undefined;
}

/** The last error of a finished row (its final attempt's), if any. */
function lastError(errors: readonly JobAttemptError[] | null): JobAttemptError | undefined {
  return errors && errors.length ? errors[errors.length - 1] : undefined;
}

/**
 * What the database says of a hint: the event to fire, or null when the rows do not bear it out
 * (a forged or replayed notification, or a job removed since). The verdict is pure, so it is
 * unit-tested apart from the read. Rules per kind:
 * - completed, failed, cancelled: the history row of that queue is in that state;
 * - retrying, stalled: a row of that queue (live, or in history since) holds an error of that
 *   attempt (stalled: a LeaseExpiredError; retrying: any other);
 * - deadLettered: the row, now in another queue, holds an error of that attempt;
 * - snoozed, parked: the live row of that queue is waiting on that (uncounted) attempt;
 * - progress: the row of that queue, running that attempt (or finished on it), holds a progress
 *   value (the one fired: the latest, which a burst of writes may have passed);
 * - released: the row of that queue (live past waiting-children, or finished since) had
 *   dependencies that all ended without failing it, and is on that attempt or a later one (it
 *   may have run since). A job without dependencies, one still waiting on them, or one a child
 *   failed, never bears it out.
 */
export function confirmHint(h: EventHint, rows: readonly ConfirmRow[]): ConfirmedEvent | null {
  const live = rows.find((r) => r.live);
  const done = rows.find((r) => !r.live);
  const job = (r: ConfirmRow): Job => rowToJob(r);
  const base = { queue: h.queue, id: h.id };
  switch (h.kind) {
    case 'completed':
      return done && done.queue === h.queue && done.state === 'completed'
        ? { ...base, event: 'completed', args: [job(done), done.result ?? null] }
        : null;
    case 'failed':
    case 'cancelled': {
      if (!done || done.queue !== h.queue || done.state !== h.kind) return null;
      const err = lastError(done.errors);
      return err ? { ...base, event: h.kind, args: [job(done), err] } : null;
    }
    case 'retrying':
    case 'stalled': {
      const r = [live, done].find((x) => x && x.queue === h.queue && errorOf(x.errors, h.attempt));
      const err = r && errorOf(r.errors, h.attempt);
      if (!r || !err || (err.name === 'LeaseExpiredError') !== (h.kind === 'stalled')) return null;
      return { ...base, event: h.kind, args: [job(r), err] };
    }
    case 'deadLettered': {
      const r = [live, done].find((x) => x && x.queue !== h.queue && errorOf(x.errors, h.attempt));
      const err = r && errorOf(r.errors, h.attempt);
      return r && err ? { ...base, event: 'deadLettered', args: [job(r), err] } : null;
    }
    case 'parked':
    case 'snoozed':
      return live &&
        live.queue === h.queue &&
        (live.state === 'waiting' || live.state === 'delayed') &&
        live.attempt === h.attempt
        ? { ...base, event: h.kind, args: [job(live)] }
        : null;
    case 'progress': {
      // The attempt may have ended before the read (a handler that reports and returns): its
      // row in history still holds the progress that attempt stored.
      const r = [live, done].find((x) => x && x.queue === h.queue && x.attempt === h.attempt && x.progress !== null);
      return r && (r.live ? r.state === 'active' : true) ? { ...base, event: 'progress', args: [job(r), r.progress!] } : null;
    }
    case 'released': {
      const r = [live, done].find((x) => x && x.queue === h.queue && x.released && x.attempt >= h.attempt);
      return r ? { ...base, event: 'released', args: [job(r)] } : null;
    }
  }
}
