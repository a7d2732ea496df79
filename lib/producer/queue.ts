import { EMPTY_COUNTS } from '../core/job';
import type { BulkJob, EnqueueOptions, Job, JobOptions, JobState, QueueCounts } from '../core/job';
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
import type { ResolvedJobDefaults } from '../core/options/resolved';
import {
  executorFor,
  transactionExecutorFor,
  type SqlExecutor,
  type TransactionTarget,
  type TransactionUse,
} from '../db/executor';
import type { JobStore } from '../db/job-store';
import { isJobId } from '../core/names';
import { resolveCleanOptions, resolveObliterateOptions, type CleanOptions, type ObliterateOptions } from '../core/clean';
import { insertedToJob, insertedToJobs, type NewJobRow } from '../db/new-job';
import type { FlowInserted, FlowNodeRow } from '../db/flow-insert';
import { buildJobRow, checkBulkEntry, payloadJsonOf, resolveDependencies } from './enqueue';
import { tracedEnqueue } from './tracing';
import * as USE from './transaction-uses';

export type { TransactionTarget } from '../db/executor';

/** Maps each job name of a queue to its payload type. */
export type JobMap = Record<string, unknown>;

/**
 * The producer side of one queue; inject it with `@InjectQueue('name')`.
 * `TJobs` maps job names to payload types, so `add` checks both.
 * @example
 * constructor(@InjectQueue('email') private readonly email: Queue<{ welcome: { userId: number } }>) {}
 * await this.email.add('welcome', { userId: 42 }, { manager });
 */
export class Queue<TJobs extends JobMap = JobMap> {
  /** @internal */
  constructor(
    readonly name: string,
    private readonly store: JobStore,
    private readonly defaults: ResolvedJobDefaults,
    private readonly maxPayloadBytes: number,
    private readonly onEnqueued: ((queue: string, name: string, count: number) => void) | null = null,
    private readonly wantsEnqueued: () => boolean = () => false,
    private readonly ambient: () => SqlExecutor | undefined = () => undefined,
    /** Wraps a caller's transaction so it is checked to be on this queue's database (more than one connection). */
    private readonly onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor,
  ) {}

  /**
   * The explicit transaction if one is given, else the caller's implicit one (CLS), else the pool.
   * Every method that takes a target uses it: add, addBulk, addFlow, cancel, retry, remove and
   * getJob. A write (`use` given) refuses a manager or client that is not in a transaction: its
   * effect would commit at once, whatever the caller's transaction then does. A read need not be
   * in one. The CLS one is, by construction (only an active transaction is taken).
   */
  private target(t: TransactionTarget | undefined, use?: TransactionUse): SqlExecutor | undefined {
    const exec = (use ? transactionExecutorFor(t, use) : executorFor(t)) ?? this.ambient();
    return exec && this.onOwnDatabase ? this.onOwnDatabase(exec) : exec;
  }

  /** @internal Reports the rows a flow inserted into this queue (see `enqueued`). */
  reportEnqueued(rows: readonly { name: string }[]): void {
    this.enqueued(rows);
  }

  /** @internal One job of a flow as a row, validated with this queue's defaults. */
  flowRow(name: string, payload: unknown, opts: JobOptions | undefined): NewJobRow {
    return buildJobRow(this.name, name, payload, opts, this.defaults, this.maxPayloadBytes, 'flow');
  }

  /** @internal True when `other` stores its jobs in this queue's database (a flow is one statement there). */
  sameDatabaseAs(other: Queue): boolean {
    return other.store === this.store;
  }

  /** @internal Inserts a flow's rows in this queue's database, in `t` (checked to be that database) or on its pool. */
  insertFlow(nodes: readonly FlowNodeRow[], t: TransactionTarget | undefined): Promise<FlowInserted> {
    return this.store.insertFlow(nodes, [], this.target(t, USE.ADD_FLOW));
  }

  /**
   * Reports the rows an add actually inserted (metrics: pgqueue_jobs_enqueued_total). An add
   * whose uniqueKey found a live job, or replaced a waiting one, added no job: not counted.
   */
  private enqueued(rows: readonly { name: string }[]): void {
    // Counting per name costs a pass over the batch: only when someone (metrics) listens.
    if (!this.onEnqueued || !this.wantsEnqueued()) return;
    const byName = new Map<string, number>();
    for (const r of rows) byName.set(r.name, (byName.get(r.name) ?? 0) + 1);
    for (const [name, count] of byName) this.onEnqueued(this.name, name, count);
  }

  /** This queue's figures (waiting, delayed, active, stalled, failed, oldest waiting age), in one query. */
  async getCounts(): Promise<QueueCounts> {
    return (await this.store.counts(this.name)).get(this.name) ?? EMPTY_COUNTS;
  }

  /**
   * Enqueues one job. With `manager` (or `client`) it joins that transaction: the job, and the
   * wake-up, exist only if it commits.
   */
  add<N extends keyof TJobs & string>(name: N, payload: TJobs[N], opts?: EnqueueOptions): Promise<Job<TJobs[N]>> {
    return tracedEnqueue(
      this.name,
      'add',
      1,
      () => this.addOne(name, payload, opts),
      (job) => [job],
    );
  }

  private async addOne<N extends keyof TJobs & string>(
    name: N,
    payload: TJobs[N],
    opts?: EnqueueOptions,
  ): Promise<Job<TJobs[N]>> {
    const row = buildJobRow(this.name, name, payload, opts, this.defaults, this.maxPayloadBytes);
    if (opts?.dependsOn !== undefined) {
      const existing = resolveDependencies(this.name, name, opts.dependsOn, row.uniqueKey !== null);
      if (existing.length) {
        const out = await this.store.insertFlow(
          [{ row, parent: -1, onFailure: 'fail-parent' }],
          existing,
          this.target(opts, USE.ADD),
        );
        this.enqueued([row]);
        const job = insertedToJob<TJobs[N]>(row, out.ids[0], out.now);
        return out.waitingChildren[0] ? { ...job, state: 'waiting-children' } : job;
      }
    }
    if (row.uniqueKey !== null) {
      const { jobs, inserted } = await this.store.insertUnique<TJobs[N]>([row], this.target(opts, USE.ADD));
      this.enqueued(inserted);
      return jobs[0];
    }
    const target = this.target(opts, USE.ADD);
    // On the queue's own pool, concurrent adds may share one statement (insertCoalesced).
    const { id, now } = target
      ? await this.store.insert([row], target).then(({ ids, now }) => ({ id: String(ids[0]), now }))
      : await this.store.insertCoalesced(row);
    this.enqueued([row]);
    return insertedToJob<TJobs[N]>(row, id, now);
  }

  /** Enqueues many jobs in one statement (one round trip, one NOTIFY). All or none are inserted. */
  addBulk<N extends keyof TJobs & string>(
    jobs: readonly BulkJob<N, TJobs[N]>[],
    target?: TransactionTarget,
  ): Promise<Job<TJobs[N]>[]> {
    return tracedEnqueue(
      this.name,
      'addBulk',
      Array.isArray(jobs) ? jobs.length : 0,
      () => this.addMany(jobs, target),
      (out) => out,
    );
  }

  private async addMany<N extends keyof TJobs & string>(
    jobs: readonly BulkJob<N, TJobs[N]>[],
    target?: TransactionTarget,
  ): Promise<Job<TJobs[N]>[]> {
    const rows = jobs.map((j, i) => {
      checkBulkEntry(this.name, j, i);
      return buildJobRow(this.name, j.name, j.payload, j.opts, this.defaults, this.maxPayloadBytes, 'bulk');
    });
    if (rows.some((r) => r.uniqueKey !== null)) {
      const { jobs: out, inserted } = await this.store.insertUnique<TJobs[N]>(rows, this.target(target, USE.ADD_BULK));
      this.enqueued(inserted);
      return out;
    }
    const { ids, now } = await this.store.insert(rows, this.target(target, USE.ADD_BULK));
    this.enqueued(rows);
    return insertedToJobs<TJobs[N]>(rows, ids, now);
  }

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
   * Pauses this queue on every node: no worker claims its jobs until `resume()`; jobs already
   * running finish, and jobs a worker prefetched go back to the queue. Stored in the database,
   * so it holds across restarts and for nodes that start later.
   */
  async pause(): Promise<void> {
    await this.store.setPaused(this.name, true);
  }

  /** Resumes a paused queue; every node's workers are woken at once. */
  async resume(): Promise<void> {
    await this.store.setPaused(this.name, false);
  }

  /** True while the queue is paused. */
  async isPaused(): Promise<boolean> {
    return this.store.isPaused(this.name);
  }

  /**
   * Runs a failed or cancelled job of this queue again: back to waiting under its own id, with
   * fresh attempts and its earlier errors kept. False when no such job is in history.
   */
  async retry(id: string, target?: TransactionTarget): Promise<boolean> {
    if (!isJobId(String(id))) return false;
    return (await this.store.retryFinished(this.name, [String(id)], this.target(target, USE.RETRY))) > 0;
  }

  /** Runs every failed job of this queue again (a thousand per statement); returns how many. */
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
}
