import type { Job, JobState } from '../core/job';
import {
  encodeCursor,
  resolveCountStates,
  resolveGetJobs,
  resolveDelayMs,
  resolvePriority,
  resolvePromoteJobs,
  resolveUniqueKey,
  type GetJobsOptions,
  type JobPage,
  type PromoteJobsOptions,
} from '../core/find-options';
import type { TransactionTarget } from '../db/executor';
import { isJobId } from '../core/names';
import { resolveCleanOptions, resolveObliterateOptions, type CleanOptions, type ObliterateOptions } from '../core/clean';
import {
  resolveCancelJobs,
  resolveRemoveJobs,
  resolveRetryJobs,
  type CancelJobsOptions,
  type RemoveJobsOptions,
  type RetryJobsOptions,
} from '../core/bulk-options';
import { PgQueueConfigError } from '../core/errors';
import type { FinishedState, LiveSelection } from '../db/bulk';
import { payloadJsonOf } from './enqueue';
import { EMPTY_LOGS, resolveGetJobLogs, type GetJobLogsOptions, type JobLogsPage } from '../core/job-logs';
import { QueueCore } from './queue-core';
import * as USE from './transaction-uses';

/** Maps each job name of a queue to its payload type. */
export type JobMap = Record<string, unknown>;

/**
 * The operator's calls of a queue (find, count, change, retry, remove, clean), which `Queue`
 * inherits: read them as `Queue`'s own.
 * @internal
 */
export abstract class QueueOperations<TJobs extends JobMap = JobMap> extends QueueCore {
  /**
   * Cancels a job of this queue. A waiting (or delayed) job ends cancelled at once:
   * `'cancelled'`. A running one has its handler's `job.signal` fired with `CancelJobError` on
   * whichever node runs it (told by NOTIFY, or by its next heartbeat if that is missed), and ends
   * cancelled unless the handler completes anyway: `'cancelling'`. `null`: no live job of this
   * queue has that id (unknown, or already finished). With `manager` or `client`, a cancel of a
   * waiting job takes effect only if that transaction commits.
   */
  async cancel(id: string, target?: TransactionTarget): Promise<'cancelled' | 'cancelling' | null> {
    if (!isJobId(String(id))) return null;
    return this.store.cancel(this.name, String(id), this.target(target, USE.CANCEL));
  }

  /**
   * Runs a failed, cancelled or completed job of this queue again: back to waiting under its own
   * id, with fresh attempts and its earlier errors kept (a completed job's result is dropped, as
   * Bull Board's retry of a completed job). False when no such job is in history.
   */
  async retry(id: string, target?: TransactionTarget): Promise<boolean> {
    if (!isJobId(String(id))) return false;
    return (await this.store.retryFinished(this.name, [String(id)], this.target(target, USE.RETRY))) > 0;
  }

  /** Runs every failed job of this queue again (a thousand per statement); returns how many. `retryJobs({ state: 'failed' })`. */
  async retryFailed(): Promise<number> {
    return this.store.retryFinished(this.name, null);
  }

  /**
   * Deletes a waiting (or delayed) job, or a finished one, of this queue. A running job is not
   * removed (false): cancel it first.
   */
  async remove(id: string, target?: TransactionTarget): Promise<boolean> {
    if (!isJobId(String(id))) return false;
    return this.store.remove(this.name, String(id), this.target(target, USE.REMOVE));
  }

  /**
   * Removes finished jobs of one state that finished more than `olderThanMs` ago (at most
   * `limit`), from history; returns how many. A thousand per statement, each its own short
   * transaction, until done. BullMQ's `clean(grace, limit, type)`, which returns the ids instead.
   * @example const removed = await queue.clean({ state: 'completed', olderThanMs: 24 * 3600_000 });
   */
  async clean(opts: CleanOptions): Promise<number> {
    const { state, olderThanMs, limit } = resolveCleanOptions(opts);
    return this.store.cleaner.cleanHistory(this.name, state, olderThanMs, limit);
  }

  /**
   * Removes every waiting and delayed job of this queue (BullMQ's `drain()`); returns how many.
   * Running jobs, jobs waiting on their children (`waiting-children`) and the history are left
   * alone; a job a worker claims meanwhile is never removed. A thousand per statement, each its
   * own short transaction, while workers run. A drained job that another waits on tells its
   * parent it was removed, as `remove()` does (the parent fails, unless its dependency says
   * `onFailure: 'ignore'`).
   */
  async drain(): Promise<number> {
    return this.store.cleaner.removeLive(this.name, 'waiting');
  }

  /**
   * Removes everything of this queue: waiting, delayed, waiting-children and finished jobs (and
   * running ones with `force`); returns how many. Refused with `ObliterateRefusedError` while
   * jobs of the queue run, unless `force`: pause the queue first so workers claim nothing while
   * it runs. A thousand rows per statement, each its own short transaction; a rerun finishes an
   * interrupted one. The queue's paused flag is kept.
   */
  async obliterate(opts?: ObliterateOptions): Promise<number> {
    const { force } = resolveObliterateOptions(opts);
    return this.store.cleaner.obliterate(this.name, force);
  }

  /** A job of this queue by id, live or finished; null when unknown (or pruned). */
  async getJob<N extends keyof TJobs & string = keyof TJobs & string>(
    id: string,
    target?: TransactionTarget,
  ): Promise<Job<TJobs[N]> | null> {
    const job = await this.store.getJob<TJobs[N]>(String(id), this.target(target));
    return job && job.queue === this.name ? job : null;
  }

  /**
   * A page of this queue's jobs in one state or several, live or finished (history within
   * retention), of one job name if given; pass `next` back as `after` for the following page.
   * Paged by keyset on each state's index (never OFFSET): a page deep in a million finished jobs
   * costs what the first one does. BullMQ's `getJobs(types, start, end)`.
   * @example
   * let page = await queue.getJobs({ state: 'failed', name: 'welcome', limit: 100 });
   * while (page.next) page = await queue.getJobs({ state: 'failed', name: 'welcome', limit: 100, after: page.next });
   */
  async getJobs<N extends keyof TJobs & string = keyof TJobs & string>(
    opts?: GetJobsOptions,
    target?: TransactionTarget,
  ): Promise<JobPage<TJobs[N]>> {
    const o = resolveGetJobs(this.name, opts);
    const page = await this.store.findJobs(this.name, o.states, o.name, o.limit, o.from, this.target(target));
    const jobs = page.jobs as Job<TJobs[N]>[];
    return page.next ? { jobs, next: encodeCursor(page.next) } : { jobs };
  }

  /**
   * How many jobs of this queue are in each state asked (all seven when none is), in BullMQ's
   * shape: `{ waiting, active, delayed, 'waiting-children', completed, failed, cancelled }`.
   * Finished states are counted from the history kept (retention); each costs an index scan of
   * that state's entries of this queue, so ask only for those you need. `getCounts()` is the
   * cheap figure set for probes. BullMQ's `getJobCounts(...types)`.
   * @example
   * const { waiting, failed } = await queue.getJobCounts('waiting', 'failed');
   */
  async getJobCounts<S extends JobState>(...states: S[]): Promise<Record<S, number>> {
    const asked = resolveCountStates(this.name, states);
    const counts = await this.store.jobCounts(this.name, {
      completed: asked.includes('completed'),
      failed: asked.includes('failed'),
      cancelled: asked.includes('cancelled'),
    });
    const out = {} as Record<S, number>;
    for (const s of asked) out[s as S] = counts[s] ?? 0;
    return out;
  }

  /**
   * The live job of this queue that holds `uniqueKey` (added with `{ uniqueKey }`), waiting,
   * delayed, running or waiting on its children; null when none does (a finished job gives its
   * key up: history keeps no unique keys).
   */
  async getJobByKey<N extends keyof TJobs & string = keyof TJobs & string>(
    uniqueKey: string,
    target?: TransactionTarget,
  ): Promise<Job<TJobs[N]> | null> {
    const key = resolveUniqueKey(this.name, uniqueKey);
    return this.store.getJobByKey<TJobs[N]>(this.name, key, this.target(target));
  }

  /**
   * Makes a delayed job of this queue due now and wakes the workers (as an enqueue does). False
   * when the job is not delayed: due already, running, finished, waiting on its children, or
   * unknown. BullMQ's `job.promote()`.
   */
  async promote(id: string, target?: TransactionTarget): Promise<boolean> {
    if (!isJobId(String(id))) return false;
    return this.store.promote(this.name, String(id), this.target(target, USE.PROMOTE));
  }

  /**
   * Makes every delayed job of this queue (of one job name, if given) due now; returns how many.
   * In batches of 1,000, each its own short statement on the queue's pool (never in a caller's
   * transaction), passing over a job a worker is claiming. BullMQ's `queue.promoteJobs()`.
   */
  async promoteJobs(opts?: PromoteJobsOptions): Promise<number> {
    const { name } = resolvePromoteJobs(this.name, opts);
    return this.store.promoteMany(this.name, name);
  }

  /**
   * Sets the priority of a waiting (or delayed) job of this queue: lower runs first, as in `add`.
   * False when no waiting job has that id: a running or finished job is never changed.
   * BullMQ's `job.changePriority({ priority })`.
   */
  async changePriority(id: string, priority: number, target?: TransactionTarget): Promise<boolean> {
    const p = resolvePriority(this.name, priority);
    if (!isJobId(String(id))) return false;
    return this.store.changePriority(this.name, String(id), p, this.target(target, USE.CHANGE_PRIORITY));
  }

  /**
   * Makes a waiting (or delayed) job of this queue due `delayMs` from now (0: now), on the
   * database clock. False when no waiting job has that id: a running or finished job is never
   * changed. BullMQ's `job.changeDelay(delay)`, which takes delayed jobs only.
   */
  async changeDelay(id: string, delayMs: number, target?: TransactionTarget): Promise<boolean> {
    const ms = resolveDelayMs(this.name, delayMs);
    if (!isJobId(String(id))) return false;
    return this.store.changeDelay(this.name, String(id), ms, this.target(target, USE.CHANGE_DELAY));
  }

  /**
   * Replaces the payload of a waiting (or delayed) job of this queue, checked as `add` checks
   * one (storable as JSON, within maxPayloadBytes). False when no waiting job has that id: a
   * running job's handler never sees its payload change. BullMQ's `job.updateData(data)`.
   */
  async updatePayload<N extends keyof TJobs & string>(
    id: string,
    payload: TJobs[N],
    target?: TransactionTarget,
  ): Promise<boolean> {
    const json = payloadJsonOf(this.name, '', payload, this.maxPayloadBytes, String(id));
    if (!isJobId(String(id))) return false;
    return this.store.updatePayload(this.name, String(id), json, this.target(target, USE.UPDATE_PAYLOAD));
  }

  /**
   * A page of the log of a job of this queue, live or finished (the lines its handlers wrote with
   * `job.log()`, oldest first), with how many lines it holds and how many the caps dropped. An
   * unknown job, or one of another queue, has an empty log. Lines of a running job show once the
   * worker has written them (within `progressIntervalMs`). BullMQ's `getJobLogs(id, start, end)`.
   * @example
   * const { logs, count } = await queue.getJobLogs(id, { offset: 0, limit: 100 });
   */
  async getJobLogs(id: string, opts?: GetJobLogsOptions, target?: TransactionTarget): Promise<JobLogsPage> {
    const { offset, limit } = resolveGetJobLogs(this.name, opts);
    if (!isJobId(String(id))) return EMPTY_LOGS;
    return (await this.store.logs.page(this.name, String(id), offset, limit, this.target(target))) ?? EMPTY_LOGS;
  }

  // Changes of many jobs (issue 27, point 2): db/bulk.ts, bulk-live.ts, bulk-history.ts.

  /**
   * Runs again every finished job of this queue in `state` (of one job name, finished before a
   * time, if given): back to waiting under its own id, fresh attempts, earlier errors kept, as
   * `retry(id)`. Returns how many. In batches of 1,000 by id, each its own short transaction on
   * the queue's pool (never a caller's): a crash in the middle leaves whole batches done, and a
   * rerun retries the rest. BullMQ's `queue.retryJobs({ state, timestamp })`.
   * @example const retried = await queue.retryJobs({ state: 'failed', name: 'welcome' });
   */
  async retryJobs(opts: RetryJobsOptions): Promise<number> {
    const f = resolveRetryJobs(this.name, opts);
    return this.store.bulk.retryFinished(this.name, f);
  }

  /**
   * Removes jobs of this queue, never a running one: by `ids` (waiting, delayed, waiting on
   * children, or finished; one statement per 1,000 ids, in `target`'s transaction when given, as
   * `remove(id)`), or every job in the filter's states (of one job name; finished before a time),
   * in batches of 1,000, each its own short transaction on the queue's pool, passing over a job a
   * worker is claiming. The filter must name its states: `{ states: [...] }` for all of them.
   * Returns how many were removed. BullMQ removes one job at a time (`job.remove()`) or by state
   * with `clean()` and `drain()`.
   * @example await queue.removeJobs({ state: 'completed', name: 'report', finishedBefore: Date.now() - 86_400_000 });
   */
  async removeJobs(opts: RemoveJobsOptions, target?: TransactionTarget): Promise<number> {
    const r = resolveRemoveJobs(this.name, opts);
    if ('ids' in r) return this.store.bulk.removeIds(this.name, r.ids, this.target(target, USE.REMOVE_JOBS));
    this.poolOnly('removeJobs', target);
    const { live, finished } = splitStates(r.filter.states);
    return this.store.bulk.removeMatching(this.name, live, finished, r.filter.name, r.filter.finishedBefore);
  }

  /**
   * Cancels jobs of this queue as `cancel(id)` does each: a waiting (or delayed, or
   * waiting-children) job ends cancelled at once; a running one has its handler's `job.signal`
   * fired and ends cancelled unless it completes anyway. By `ids` (one statement per 1,000, in
   * `target`'s transaction when given), or every live job in the filter's states (of one job
   * name), in batches of 1,000 on the queue's pool. Returns how many were cancelled or signalled.
   * BullMQ has no bulk cancel.
   * @example await queue.cancelJobs({ states: ['waiting', 'delayed'], name: 'newsletter' });
   */
  async cancelJobs(opts: CancelJobsOptions, target?: TransactionTarget): Promise<number> {
    const r = resolveCancelJobs(this.name, opts);
    if ('ids' in r) return this.store.bulk.cancelIds(this.name, r.ids, this.target(target, USE.CANCEL_JOBS));
    this.poolOnly('cancelJobs', target);
    return this.store.bulk.cancelMatching(this.name, splitStates(r.filter.states).live, r.filter.name);
  }

  /** A filter form walks a queue in batches, each committed on its own: a caller's transaction cannot hold them. */
  private poolOnly(call: string, target: TransactionTarget | undefined): void {
    if (target?.manager || target?.client) {
      throw new PgQueueConfigError(
        `${call}() of queue "${this.name}": a filter runs in batches on the queue's own pool, each committed on its own ` +
          `(no statement locks more than 1,000 rows), so it cannot join your transaction. Pass { ids } to change jobs ` +
          `in your transaction, or leave the transaction out.`,
      );
    }
  }
}

/** A filter's states as the live walks and finished states the store takes. */
function splitStates(states: readonly string[]): { live: LiveSelection[]; finished: FinishedState[] } {
  const live: LiveSelection[] = [];
  const finished: FinishedState[] = [];
  for (const s of states) {
    if (s === 'completed' || s === 'failed' || s === 'cancelled') finished.push(s);
    else live.push(s as LiveSelection);
  }
  // Waiting and delayed together: one walk over the claim index rather than two.
  if (live.includes('waiting') && live.includes('delayed')) {
    return { live: ['queued', ...live.filter((s) => s !== 'waiting' && s !== 'delayed')], finished };
  }
  return { live, finished };
}
