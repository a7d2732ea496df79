import type { BulkJob, EnqueueOptions, Job, JobOptions, QueueCounts } from '../core/job';
import { EMPTY_COUNTS } from '../core/job';
import { resolveGroupCountsOptions, type GroupCountsOptions, type QueueGroupCounts } from '../core/group-counts';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import type { AddedJob, QueueEvents, QueueEventsSource, WaitForJobOptions } from '../core/queue-events';
import { quote } from '../core/input-text';
import { checkConcurrency } from '../core/concurrency-checks';
import type { SqlExecutor, TransactionTarget } from '../db/executor';
import { insertedToJob, insertedToJobs, type NewJobRow } from '../db/new-job';
import type { FlowInserted, FlowNodeRow } from '../db/flow-insert';
import { buildJobRow, checkBulkEntry, groupKey, resolveDependencies } from './enqueue';
import { tracedEnqueue } from './tracing';
import { isJobId } from '../core/names';
import { payloadJsonOf } from './enqueue';
import type { JobStep } from '../core/steps';
import * as USE from './transaction-uses';
import type { JobMap } from './queue-operations';
import { QueueSchedulers } from './queue-schedulers';

export type { TransactionTarget } from '../db/executor';
export type { JobMap } from './queue-operations';

/**
 * The producer side of one queue; inject it with `@InjectQueue('name')`.
 * `TJobs` maps job names to payload types, so `add` checks both.
 * @example
 * constructor(@InjectQueue('email') private readonly email: Queue<{ welcome: { userId: number } }>) {}
 * await this.email.add('welcome', { userId: 42 }, { manager });
 */
export class Queue<TJobs extends JobMap = JobMap> extends QueueSchedulers<TJobs> {
  /**
   * Delivers a signal to the job's `job.waitFor(name)`: its payload (JSON) becomes the wait's
   * result, and a job parked on it is woken at once. A signal sent before the job reaches its
   * wait is kept for it. True when recorded; false for a job of this queue that is not live
   * (unknown, finished), or whose wait `name` was already signalled or timed out: the first
   * signal wins. With `manager` or `client`, it takes effect only if that transaction commits.
   * @example await orders.signal(jobId, 'approved', { by: user.id }, { manager });
   */
  async signal(jobId: string, name: string, payload?: unknown, target?: TransactionTarget): Promise<boolean> {
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw new PgQueueConfigError(`signal(): the name must be a string of 1 to 200 characters, got ${quote(name)}.`);
    }
    if (!isJobId(String(jobId))) return false;
    const json = payloadJsonOf(this.name, name, payload === undefined ? null : payload, this.maxPayloadBytes);
    return this.store.steps.signal(String(jobId), this.name, name, json, this.target(target, USE.SIGNAL));
  }

  /**
   * The recorded steps of a job of this queue (live or in history), in the order the handler
   * reached them: each one's kind, state, result, attempt and times (docs/steps.md).
   */
  async getJobSteps(jobId: string): Promise<JobStep[]> {
    if (!isJobId(String(jobId))) return [];
    const { nowMs, steps } = await this.store.steps.load(String(jobId));
    return steps.map((s) => ({
      name: s.name,
      kind: s.kind,
      status: s.status === 'sleeping' && s.wakeAtMs !== null && s.wakeAtMs <= nowMs ? 'done' : s.status,
      result: s.result,
      attempt: s.attempt,
      startedAt: s.startedAtMs === null ? null : new Date(s.startedAtMs),
      finishedAt: s.finishedAtMs === null ? null : new Date(s.finishedAtMs),
      wakeAt: s.wakeAtMs === null ? null : new Date(s.wakeAtMs),
    }));
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

  /** This queue's figures (waiting, delayed, active, stalled, failed, oldest waiting age), in one query. */
  async getCounts(): Promise<QueueCounts> {
    return (await this.store.counts(this.name)).get(this.name) ?? EMPTY_COUNTS;
  }

  /**
   * This queue's groups (jobs added with `{ group }`): the top `top` (20) by running + waiting
   * jobs, or by their oldest waiting job's age (`orderBy: 'oldest'`), each with its waiting and
   * active jobs and oldest waiting age, and the rest summed in `other`. One bounded read: past
   * 10,000 due (or running) jobs it counts the first 10,000 in claim order and says so
   * (`complete: false`). docs/health-and-metrics.md#groups.
   * @example const { groups } = await queue.getGroupCounts({ top: 10 });
   */
  async getGroupCounts(opts?: GroupCountsOptions): Promise<QueueGroupCounts> {
    const { top, orderBy } = resolveGroupCountsOptions(opts);
    return this.store.groupCounts(this.name, top, orderBy);
  }

  /**
   * Enqueues one job. With `manager` (or `client`) it joins that transaction: the job, and the
   * wake-up, exist only if it commits.
   */
  add<N extends keyof TJobs & string>(name: N, payload: TJobs[N], opts?: EnqueueOptions): Promise<AddedJob<TJobs[N]>> {
    return tracedEnqueue(
      this.name,
      'add',
      1,
      () => this.addOne(name, payload, opts),
      (job) => [job],
    ).then((job) => this.waitable(job));
  }

  /** @internal Set by the module: the events hub of this queue's database. */
  attachEvents(source: QueueEventsSource): void {
    this.eventsSource = source;
  }

  private eventsSource: QueueEventsSource | null = null;

  private source(caller: string): QueueEventsSource {
    if (!this.eventsSource) {
      throw new PgQueueError(
        `${caller} of queue ${quote(this.name)} needs the queue from PgQueueModule (@InjectQueue or QueueService).`,
      );
    }
    return this.eventsSource;
  }

  /** `job` with `waitUntilFinished()`, not enumerable: a job logged or compared shows only its fields. */
  private waitable<T>(job: Job<T>): AddedJob<T> {
    Object.defineProperty(job, 'waitUntilFinished', {
      value: (opts?: WaitForJobOptions) => this.waitForJob(job.id, opts),
      enumerable: false,
    });
    return job as AddedJob<T>;
  }

  /**
   * The cross-process events of this queue (BullMQ's `new QueueEvents(name)`): every outcome
   * written by any node, heard in this process whether or not it runs workers, each confirmed by
   * a read of the row. Nothing is listened to until the first `on` or iterator. Needs the LISTEN
   * connection (not in poll-only mode: `listen: false` hears nothing). docs/events.md.
   * @example
   * this.exports.events().on('completed', (job, result) => this.notifyUser(job, result));
   */
  events(): QueueEvents {
    return this.source('events()').events(this.name);
  }

  /**
   * Waits for job `id` of this queue to finish, in any process: resolves with its result;
   * rejects with JobFinishedWithError (failed, cancelled or dead-lettered: its last error),
   * JobNotFoundError, or WaitForJobTimeoutError after `timeoutMs`. Subscribes first, then reads
   * the row, so a job that finished before the call is answered at once. Without LISTEN
   * (poll-only mode) it polls the row (100 ms, growing to 2 s). BullMQ's `job.waitUntilFinished()`.
   */
  waitForJob<R = unknown>(id: string, opts?: WaitForJobOptions): Promise<R> {
    return this.source('waitForJob()').waitForJob<R>(this.name, String(id), opts);
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
    if (row.dedupKey !== null) return this.addDeduplicated<TJobs[N]>([row], this.target(opts, USE.ADD)).then((jobs) => jobs[0]);
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
    if (rows.some((r) => r.dedupKey !== null)) {
      if (rows.some((r) => r.uniqueKey !== null)) {
        throw new PgQueueConfigError(
          `addBulk() of queue ${quote(this.name)}: jobs with deduplication and jobs with uniqueKey in one call; split the call.`,
        );
      }
      return this.addDeduplicated(rows, this.target(target, USE.ADD_BULK));
    }
    if (rows.some((r) => r.uniqueKey !== null)) {
      const { jobs: out, inserted } = await this.store.insertUnique<TJobs[N]>(rows, this.target(target, USE.ADD_BULK));
      this.enqueued(inserted);
      return out;
    }
    const { ids, now } = await this.store.insert(rows, this.target(target, USE.ADD_BULK));
    this.enqueued(rows);
    return insertedToJobs<TJobs[N]>(rows, ids, now);
  }

  /** Adds with `deduplication` (and any others of the call) in one statement; a held key returns its job. */
  private async addDeduplicated<T>(rows: readonly NewJobRow[], db: SqlExecutor | undefined): Promise<Job<T>[]> {
    const { jobs, inserted } = await this.store.dedup.insertDeduplicated<T>(rows, (id, tx) => this.store.getJob<T>(id, tx), db);
    this.enqueued(inserted);
    return jobs;
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
   * Stores the queue's global concurrency: at most `n` of its jobs run at once across every node
   * (BullMQ's `queue.setGlobalConcurrency`). It overrides the `globalConcurrency` option of every
   * node until `removeGlobalConcurrency()`, and holds across restarts. Nodes learn of it at once
   * (a NOTIFY confirmed by a read), or within `pollIntervalMs` without LISTEN; jobs already
   * running finish. Rejects with PgQueueConfigError unless `n` is a whole number from 1 to 2^31-1.
   */
  async setGlobalConcurrency(n: number): Promise<void> {
    const checked = checkConcurrency(`Queue "${this.name}" setGlobalConcurrency()`, n, 2 ** 31 - 1);
    await this.store.limits.setGlobalConcurrency(this.name, checked);
  }

  /** The stored global concurrency (`setGlobalConcurrency`), or null when none is stored (the option then applies). */
  async getGlobalConcurrency(): Promise<number | null> {
    return (await this.store.limits.globalConcurrencies([this.name])).get(this.name) ?? null;
  }

  /** Drops the stored global concurrency: each node applies its `globalConcurrency` option again (none: no limit). */
  async removeGlobalConcurrency(): Promise<void> {
    await this.store.limits.setGlobalConcurrency(this.name, null);
  }

  /**
   * Stores group `group`'s concurrency in a grouped queue (docs/groups.md): at most `n` of its
   * jobs run at once across every node, over the queue's `group.concurrency`, until
   * `removeGroupConcurrency(group)`; it holds across restarts. Every node's next claim reads it
   * (no hint, no restart); jobs already running finish. Ignored by `order: 'fifo'` (one at a
   * time). Rejects with PgQueueConfigError unless `n` is a whole number from 1 to 2^31-1.
   */
  async setGroupConcurrency(group: string, n: number): Promise<void> {
    const where = `Queue "${this.name}" setGroupConcurrency()`;
    const checked = checkConcurrency(where, n, 2 ** 31 - 1);
    await this.store.groups.setConcurrency(this.name, groupKey(where, group), checked);
  }

  /** The stored concurrency of `group` (`setGroupConcurrency`), or null when none is stored (the queue's option applies). */
  async getGroupConcurrency(group: string): Promise<number | null> {
    return this.store.groups.getConcurrency(this.name, groupKey(`Queue "${this.name}" getGroupConcurrency()`, group));
  }

  /** Drops group `group`'s stored concurrency: the queue's `group.concurrency` applies to it again (none: no limit). */
  async removeGroupConcurrency(group: string): Promise<void> {
    await this.store.groups.setConcurrency(this.name, groupKey(`Queue "${this.name}" removeGroupConcurrency()`, group), null);
  }
}
