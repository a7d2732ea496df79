import type { AddedJob, QueueEvents, WaitForJobOptions } from '../core/queue-events';
import { Inject, Injectable } from '@nestjs/common';
import {
  EMPTY_COUNTS,
  type BulkJob,
  type EnqueueOptions,
  type FlowJob,
  type FlowNode,
  type Job,
  type JobState,
  type QueueCounts,
} from '../core/job';
import type { GetJobsOptions, JobPage, PromoteJobsOptions } from '../core/find-options';
import { resolveGroupCountsOptions, type GroupCountsOptions, type QueueGroupCounts } from '../core/group-counts';
import type { CleanOptions, ObliterateOptions } from '../core/clean';
import type { GetJobLogsOptions, JobLogsPage } from '../core/job-logs';
import type { JobScheduler, JobSchedulerRepeat, JobSchedulerTemplate } from '../core/job-scheduler';
import type { CancelJobsOptions, RemoveJobsOptions, RetryJobsOptions } from '../core/bulk-options';
import { executorFor, type TransactionTarget } from '../db/executor';
import type { JobMap, Queue } from '../producer/queue';
import { PgQueueConfigError } from '../core/errors';
import { validateQueueName } from '../core/names';
import { checkConcurrency, MAX_NODE_CONCURRENCY } from '../core/concurrency-checks';
import { PG_QUEUE_RUNTIME } from './pg-queue.constants';
import type { PgQueueRuntime } from './pg-queue.runtime';

/**
 * Enqueue into any queue by name, without injecting each `Queue`.
 * @example await queues.add('email', 'welcome', { userId: 42 }, { manager });
 */
@Injectable()
export class QueueService {
  constructor(@Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime) {}

  /**
   * The producer of a registered queue. Throws `PgQueueConfigError` for a name this app never
   * registered with `PgQueueModule.registerQueue` (a producer-only process registers its queues too).
   */
  getQueue<TJobs extends JobMap = JobMap>(queue: string): Queue<TJobs> {
    return this.runtime.queue(queue, 'QueueService.getQueue') as unknown as Queue<TJobs>;
  }

  /** Enqueues one job into a registered queue; rejects with `PgQueueConfigError` for an unregistered one. */
  async add<TPayload = unknown>(
    queue: string,
    name: string,
    payload: TPayload,
    opts?: EnqueueOptions,
  ): Promise<AddedJob<TPayload>> {
    const q = this.runtime.queue(queue, 'QueueService.add') as unknown as Queue<Record<string, TPayload>>;
    return q.add(name, payload, opts);
  }

  /**
   * The cross-process events of a registered queue (`queue.events()`, BullMQ's `QueueEvents`),
   * in any process, workers or not. Closed with the module.
   */
  queueEvents(queue: string): QueueEvents {
    return this.runtime.queue(queue, 'QueueService.queueEvents').events();
  }

  /** Waits for job `id` of a registered queue to finish (`queue.waitForJob()`): its result, or a typed rejection. */
  waitForJob<R = unknown>(queue: string, id: string, opts?: WaitForJobOptions): Promise<R> {
    return this.runtime.queue(queue, 'QueueService.waitForJob').waitForJob<R>(id, opts);
  }

  /** Enqueues many jobs into a registered queue, in one statement; rejects for an unregistered one. */
  async addBulk<TPayload = unknown>(
    queue: string,
    jobs: readonly BulkJob<string, TPayload>[],
    target?: TransactionTarget,
  ): Promise<Job<TPayload>[]> {
    const q = this.runtime.queue(queue, 'QueueService.addBulk') as unknown as Queue<Record<string, TPayload>>;
    return q.addBulk(jobs, target);
  }

  /**
   * Creates a flow: a parent job that runs only once all its children have finished, to any
   * depth and across queues, in one statement (`@nestjs/bullmq`'s `FlowProducer.add`). Every
   * queue named must be registered. With `{ manager }` or `{ client }` (or inside
   * `@Transactional()`) the whole tree commits or rolls back with that transaction. Returns the
   * jobs in the shape of the flow; a job with children starts in state `waiting-children`.
   * @example
   * await queues.addFlow({ queue: 'orders', name: 'ship', payload: { orderId }, children: [
   *   { queue: 'stock', name: 'reserve', payload: { sku } },
   * ] }, { manager });
   */
  addFlow<TPayload = unknown>(flow: FlowJob<TPayload>, target?: TransactionTarget): Promise<FlowNode<TPayload>> {
    return this.runtime.flows.add(flow, target);
  }

  /**
   * `queue.clean()` on a registered queue: removes its finished jobs of one state older than
   * `olderThanMs` (at most `limit`); returns how many.
   * @example await queues.clean('email', { state: 'completed', olderThanMs: 24 * 3600_000 });
   */
  clean(queue: string, opts: CleanOptions): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.clean').clean(opts);
  }

  /** `queue.drain()` on a registered queue: removes its waiting and delayed jobs; returns how many. */
  drain(queue: string): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.drain').drain();
  }

  /**
   * `queue.obliterate()` on a registered queue: removes all its jobs, live and finished; refused
   * while jobs of it run, unless `force`. Returns how many.
   */
  obliterate(queue: string, opts?: ObliterateOptions): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.obliterate').obliterate(opts);
  }

  /**
   * Figures of every queue that has jobs or is registered here, in one query per database: what
   * a health probe or a metrics scrape reads.
   */
  async getCounts(): Promise<Record<string, QueueCounts>> {
    const many = this.runtime.connections.length > 1;
    const found = await Promise.all(
      this.runtime.connections.map((c) =>
        // Which database failed to answer, for the health check's and the scrape's message.
        many ? c.store.counts(null).catch((err: Error) => Promise.reject(onConnection(c.name, err))) : c.store.counts(null),
      ),
    );
    const out: Record<string, QueueCounts> = {};
    for (const q of this.runtime.registeredQueues) out[q.name] = EMPTY_COUNTS;
    for (const counts of found) for (const [name, c] of counts) out[name] = c;
    return out;
  }

  /**
   * A queue's groups (`queue.getGroupCounts()`), of any queue with jobs in this app's databases,
   * registered here or not (an unregistered name is read in the default connection's database):
   * what the metrics' and the health check's group figures read.
   */
  async getGroupCounts(queue: string, opts?: GroupCountsOptions): Promise<QueueGroupCounts> {
    const { top, orderBy } = resolveGroupCountsOptions(opts);
    validateQueueName(queue);
    return this.runtime.connectionOf(queue).store.groupCounts(queue, top, orderBy);
  }

  /**
   * Any job by id, of any queue, live or finished; null when unknown. Reads in `target`'s
   * transaction, else in the caller's implicit one (@nestjs-cls/transactional), so it sees a job
   * that transaction enqueued and has not committed yet: then in that transaction's database.
   * Without one, with more than one connection, each database is asked in turn (default first)
   * and the first job found wins: ids are per database, so prefer `getQueue(name).getJob(id)`.
   */
  async getJob<TPayload = unknown>(id: string, target?: TransactionTarget): Promise<Job<TPayload> | null> {
    const exec = executorFor(target) ?? this.runtime.ambientTransaction();
    if (exec) {
      const conn = await this.runtime.connectionOfTarget(exec);
      if (!conn) {
        throw new PgQueueConfigError(
          'QueueService.getJob: the manager or client passed (or the @Transactional() transaction) is on none of the ' +
            "databases of this app's connections. Pass one of a queue database's, or none.",
        );
      }
      return conn.store.getJob<TPayload>(String(id), exec);
    }
    for (const c of this.runtime.connections) {
      const job = await c.store.getJob<TPayload>(String(id), undefined);
      if (job) return job;
    }
    return null;
  }

  /**
   * How many jobs of `queue` this process runs at once now, or null when it runs no worker for
   * it (`workers: false`, or no `@Processor`). BullMQ: `worker.concurrency`.
   */
  getConcurrency(queue: string): number | null {
    this.runtime.queue(queue, 'QueueService.getConcurrency');
    return this.runtime.connectionOf(queue).supervisor.concurrencyOf(queue);
  }

  /**
   * Changes how many jobs of `queue` this process runs at once, without a restart (BullMQ:
   * `worker.concurrency = n`); other nodes keep theirs. Growing claims for the new slots at once;
   * shrinking lets running jobs finish and hands prefetched ones back. Lasts until the process
   * ends or the next call: the registered `concurrency` applies again at the next boot. Throws
   * PgQueueConfigError for a queue not registered or with no worker in this process, or unless
   * `n` is a whole number from 1 to 1000. For a cap across every node, see `setGlobalConcurrency`.
   */
  setConcurrency(queue: string, n: number): void {
    this.runtime.queue(queue, 'QueueService.setConcurrency');
    const checked = checkConcurrency(`QueueService.setConcurrency('${queue}')`, n, MAX_NODE_CONCURRENCY);
    if (!this.runtime.connectionOf(queue).supervisor.setConcurrency(queue, checked)) {
      throw new PgQueueConfigError(
        `QueueService.setConcurrency('${queue}'): this process runs no worker for queue "${queue}" ` +
          `(workers: false, or no @Processor('${queue}')). Call it in a process that runs the queue's jobs, ` +
          'or use setGlobalConcurrency to cap the queue across every node.',
      );
    }
  }

  /**
   * Stores a cap on `queue`'s running jobs across every node (`Queue.setGlobalConcurrency`), or
   * with null removes it (`Queue.removeGlobalConcurrency`), so the option applies again.
   */
  async setGlobalConcurrency(queue: string, n: number | null): Promise<void> {
    const q = this.runtime.queue(queue, 'QueueService.setGlobalConcurrency');
    await (n === null ? q.removeGlobalConcurrency() : q.setGlobalConcurrency(n));
  }

  /** `Queue.getGlobalConcurrency` of a registered queue: the stored value, or null. */
  async getGlobalConcurrency(queue: string): Promise<number | null> {
    return this.runtime.queue(queue, 'QueueService.getGlobalConcurrency').getGlobalConcurrency();
  }

  /**
   * Stores group `group`'s concurrency in grouped queue `queue` (`Queue.setGroupConcurrency`), or
   * with null removes it (`Queue.removeGroupConcurrency`), so the queue's group.concurrency applies again.
   */
  async setGroupConcurrency(queue: string, group: string, n: number | null): Promise<void> {
    const q = this.runtime.queue(queue, 'QueueService.setGroupConcurrency');
    await (n === null ? q.removeGroupConcurrency(group) : q.setGroupConcurrency(group, n));
  }

  /** `Queue.getGroupConcurrency` of a registered queue: the stored value, or null. */
  async getGroupConcurrency(queue: string, group: string): Promise<number | null> {
    return this.runtime.queue(queue, 'QueueService.getGroupConcurrency').getGroupConcurrency(group);
  }

  /** `Queue.getJobs` of a registered queue: a page of its jobs in some states, by keyset. */
  async getJobs<TPayload = unknown>(
    queue: string,
    opts?: GetJobsOptions,
    target?: TransactionTarget,
  ): Promise<JobPage<TPayload>> {
    return this.runtime.queue(queue, 'QueueService.getJobs').getJobs(opts, target) as Promise<JobPage<TPayload>>;
  }

  /** `Queue.getJobCounts` of a registered queue: how many jobs are in each state asked (all when none is). */
  async getJobCounts<S extends JobState>(queue: string, ...states: S[]): Promise<Record<S, number>> {
    return this.runtime.queue(queue, 'QueueService.getJobCounts').getJobCounts(...states);
  }

  /** `Queue.getJobByKey` of a registered queue: the live job holding a unique key, or null. */
  async getJobByKey<TPayload = unknown>(
    queue: string,
    uniqueKey: string,
    target?: TransactionTarget,
  ): Promise<Job<TPayload> | null> {
    return this.runtime.queue(queue, 'QueueService.getJobByKey').getJobByKey(uniqueKey, target) as Promise<Job<TPayload> | null>;
  }

  /** `Queue.getDeduplicationJobId` of a registered queue: the job holding a `deduplication` key, or null. */
  async getDeduplicationJobId(queue: string, key: string, target?: TransactionTarget): Promise<string | null> {
    return this.runtime.queue(queue, 'QueueService.getDeduplicationJobId').getDeduplicationJobId(key, target);
  }

  /** `Queue.removeDeduplicationKey` of a registered queue: frees a `deduplication` key; true when it was held. */
  async removeDeduplicationKey(queue: string, key: string, target?: TransactionTarget): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.removeDeduplicationKey').removeDeduplicationKey(key, target);
  }

  /** `Queue.promote` of a registered queue: a delayed job due now; false when it is not delayed. */
  async promote(queue: string, id: string, target?: TransactionTarget): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.promote').promote(id, target);
  }

  /** `Queue.promoteJobs` of a registered queue: every delayed job (of one name) due now, in batches; returns how many. */
  async promoteJobs(queue: string, opts?: PromoteJobsOptions): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.promoteJobs').promoteJobs(opts);
  }

  /** `Queue.changePriority` of a registered queue: a waiting job's priority; false when no waiting job has that id. */
  async changePriority(queue: string, id: string, priority: number, target?: TransactionTarget): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.changePriority').changePriority(id, priority, target);
  }

  /** `Queue.changeDelay` of a registered queue: a waiting job due `delayMs` from now; false when no waiting job has that id. */
  async changeDelay(queue: string, id: string, delayMs: number, target?: TransactionTarget): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.changeDelay').changeDelay(id, delayMs, target);
  }

  /** `Queue.updatePayload` of a registered queue: a waiting job's payload, checked as add's; false when no waiting job has that id. */
  async updatePayload<TPayload = unknown>(
    queue: string,
    id: string,
    payload: TPayload,
    target?: TransactionTarget,
  ): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.updatePayload').updatePayload(id, payload as never, target);
  }

  /** `Queue.getJobLogs` of a registered queue: a page of a job's log lines, oldest first, and how many it holds. */
  async getJobLogs(queue: string, id: string, opts?: GetJobLogsOptions, target?: TransactionTarget): Promise<JobLogsPage> {
    return this.runtime.queue(queue, 'QueueService.getJobLogs').getJobLogs(id, opts, target);
  }

  /**
   * `Queue.retryJobs` of a registered queue: its finished jobs of one state (of one name,
   * finished before a time) run again, in batches on the queue's pool; returns how many.
   * @example await queues.retryJobs('email', { state: 'failed', name: 'welcome' });
   */
  async retryJobs(queue: string, opts: RetryJobsOptions): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.retryJobs').retryJobs(opts);
  }

  /**
   * `Queue.removeJobs` of a registered queue: jobs by ids (in `target`'s transaction when
   * given), or every job a filter matches, in batches on the queue's pool; never a running one.
   * Returns how many.
   * @example await queues.removeJobs('email', { state: 'completed', finishedBefore: Date.now() - 86_400_000 });
   */
  async removeJobs(queue: string, opts: RemoveJobsOptions, target?: TransactionTarget): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.removeJobs').removeJobs(opts, target);
  }

  /**
   * `Queue.cancelJobs` of a registered queue: jobs by ids (in `target`'s transaction when
   * given), or every live job a filter matches, in batches on the queue's pool; running ones
   * are signalled as by `cancel(id)`. Returns how many.
   * @example await queues.cancelJobs('email', { states: ['waiting', 'delayed'], name: 'newsletter' });
   */
  async cancelJobs(queue: string, opts: CancelJobsOptions, target?: TransactionTarget): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.cancelJobs').cancelJobs(opts, target);
  }

  /** `Queue.upsertJobScheduler` of a registered queue: creates or replaces the job scheduler `id`. */
  async upsertJobScheduler<TPayload = unknown>(
    queue: string,
    id: string,
    repeat: JobSchedulerRepeat,
    template: JobSchedulerTemplate<TPayload>,
    target?: TransactionTarget,
  ): Promise<JobScheduler<TPayload>> {
    const q = this.runtime.queue(queue, 'QueueService.upsertJobScheduler') as unknown as Queue<Record<string, TPayload>>;
    return q.upsertJobScheduler(id, repeat, template, target);
  }

  /** `Queue.getJobScheduler` of a registered queue. */
  async getJobScheduler<TPayload = unknown>(
    queue: string,
    id: string,
    target?: TransactionTarget,
  ): Promise<JobScheduler<TPayload> | null> {
    return this.runtime.queue(queue, 'QueueService.getJobScheduler').getJobScheduler<TPayload>(id, target);
  }

  /** `Queue.getJobSchedulers` of a registered queue: by next tick, `start` and `end` inclusive (-1: all). */
  async getJobSchedulers<TPayload = unknown>(
    queue: string,
    start?: number,
    end?: number,
    asc?: boolean,
  ): Promise<JobScheduler<TPayload>[]> {
    return this.runtime.queue(queue, 'QueueService.getJobSchedulers').getJobSchedulers<TPayload>(start, end, asc);
  }

  /** `Queue.getJobSchedulersCount` of a registered queue. */
  async getJobSchedulersCount(queue: string): Promise<number> {
    return this.runtime.queue(queue, 'QueueService.getJobSchedulersCount').getJobSchedulersCount();
  }

  /** `Queue.removeJobScheduler` of a registered queue. */
  async removeJobScheduler(queue: string, id: string, target?: TransactionTarget): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.removeJobScheduler').removeJobScheduler(id, target);
  }

  /** `Queue.pauseJobScheduler` of a registered queue. */
  async pauseJobScheduler(queue: string, id: string): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.pauseJobScheduler').pauseJobScheduler(id);
  }

  /** `Queue.resumeJobScheduler` of a registered queue. */
  async resumeJobScheduler(queue: string, id: string): Promise<boolean> {
    return this.runtime.queue(queue, 'QueueService.resumeJobScheduler').resumeJobScheduler(id);
  }
}

/** `err` with the connection's name in front of its message. */
function onConnection(name: string, err: Error): Error {
  const out = new Error(`connection "${name}": ${err?.message ?? String(err)}`, { cause: err });
  return out;
}
