import { PgQueueConfigError, PgQueueError } from '../core/errors';
import { isJobId } from '../core/names';
import { JobFinishedWithError, JobNotFoundError, WaitForJobTimeoutError, type WaitForJobOptions } from '../core/queue-events';
import type { ConfirmRow } from '../db/events';
import { rowToJob } from '../db/job-row';
import type { ConfirmedEvent } from './event-confirm';
import { FINAL_KINDS, type EventHint, type EventReads, type EventSink, type EventsHub } from './queue-events-hub';

/** How long a wait gives the LISTEN connection to come up before its first read. */
const READY_WAIT_MS = 2_000;
/** While LISTEN runs, the row is still read this often: ends no notification tells (a removal, or any outcome with `events.publish` off). */
const LISTENING_RECHECK_MS = 5_000;
/** Without LISTEN (poll-only, or while it reconnects): the first re-read, growing by half up to POLL_MAX_MS. */
const POLL_FIRST_MS = 100;
const POLL_MAX_MS = 2_000;

/** What the rows of a job say of a wait: done (resolve or reject), or not yet. */
type Verdict = { done: true; ok: true; result: unknown } | { done: true; ok: false; error: Error } | { done: false };

/** The verdict of the rows read for job `id` of `queue` (pure: unit-tested). */
export function waitVerdict(queue: string, id: string, rows: readonly ConfirmRow[]): Verdict {
  const done = rows.find((r) => !r.live);
  const live = rows.find((r) => r.live);
  if (done && done.queue === queue) {
    if (done.state === 'completed') return { done: true, ok: true, result: done.result ?? null };
    const state = done.state === 'cancelled' ? 'cancelled' : 'failed';
    const errors = done.errors ?? [];
    return { done: true, ok: false, error: new JobFinishedWithError(rowToJob(done), state, errors[errors.length - 1] ?? null) };
  }
  if (live && live.queue === queue) return { done: false };
  // Moved to its dead-letter queue: failed, as far as this queue is concerned.
  const moved = live ?? done;
  if (moved && (moved.errors ?? []).length > 0) {
    const errors = moved.errors;
    return {
      done: true,
      ok: false,
      error: new JobFinishedWithError(rowToJob(moved), 'failed', errors[errors.length - 1] ?? null),
    };
  }
  return { done: true, ok: false, error: new JobNotFoundError(id, queue) };
}

/**
 * `queue.waitForJob(id)` and `job.waitUntilFinished()`: subscribes to the job's id first, then
 * reads its row, so an outcome that committed before the wait began is found by the read and
 * one after it is heard. Every event heard is confirmed by a read (the hub's), and the row is
 * read again now and then besides (every 5 s while listening; from 100 ms growing to 2 s without
 * LISTEN, in poll-only mode or while the connection is down), so the wait never hangs on a
 * notification that did not come.
 */
export function waitForJob<R>(
  hub: EventsHub,
  reads: EventReads,
  queue: string,
  id: string,
  opts: WaitForJobOptions | undefined,
): Promise<R> {
  const timeoutMs = opts?.timeoutMs;
  if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1)) {
    return Promise.reject(
      new PgQueueConfigError(
        `waitForJob(${id}, { timeoutMs: ${String(timeoutMs)} }): use a whole number of milliseconds, at least 1.`,
      ),
    );
  }
  if (!isJobId(String(id))) return Promise.reject(new JobNotFoundError(String(id), queue));
  return new Promise<R>((resolve, reject) => {
    let finished = false;
    let timer: NodeJS.Timeout | null = null;
    let deadline: NodeJS.Timeout | null = null;
    let pollMs = POLL_FIRST_MS;
    let reading = false;
    let again = false;

    const finish = (v: Verdict) => {
      if (!v.done || finished) return;
      finished = true;
      if (timer) clearTimeout(timer);
      if (deadline) clearTimeout(deadline);
      hub.remove(sink);
      if (v.ok) resolve(v.result as R);
      else reject(v.error);
    };
    const schedule = () => {
      if (finished) return;
      if (timer) clearTimeout(timer);
      const wait = hub.listening ? LISTENING_RECHECK_MS : pollMs;
      pollMs = Math.min(POLL_MAX_MS, Math.round(pollMs * 1.5));
      timer = setTimeout(() => void check(), wait);
    };
    const check = async (): Promise<void> => {
      if (finished) return;
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      try {
        do {
          again = false;
          finish(waitVerdict(queue, id, await reads.confirm([id])));
        } while (again && !finished);
      } catch {
        // The database may be restarting: the next read tries again.
      } finally {
        reading = false;
        schedule();
      }
    };
    const sink: EventSink = {
      wants: (h: EventHint) => h.id === id && FINAL_KINDS.has(h.kind),
      deliver: (e: ConfirmedEvent) => {
        if (e.id !== id) return;
        // The hub read the row and it bears the event out: its answer is the wait's.
        if (e.event === 'completed' && e.queue === queue) finish({ done: true, ok: true, result: e.args[1] });
        else if ((e.event === 'failed' || e.event === 'cancelled') && e.queue === queue) {
          finish({ done: true, ok: false, error: new JobFinishedWithError(e.args[0], e.event, e.args[1]) });
        } else void check();
      },
      lagged: () => void check(),
      connected: () => void check(),
      closed: () =>
        finish({
          done: true,
          ok: false,
          error: new PgQueueError(`Waiting for job ${id} of queue "${queue}" ended: the queue module is shutting down.`),
        }),
    };
    if (timeoutMs !== undefined) {
      deadline = setTimeout(() => finish({ done: true, ok: false, error: new WaitForJobTimeoutError(id, timeoutMs) }), timeoutMs);
    }
    hub.add(sink);
    // Subscribe first, then read: LISTEN is up (or given up on) before the first read.
    void hub.ready(Math.min(READY_WAIT_MS, timeoutMs ?? READY_WAIT_MS)).then(() => check());
  });
}
