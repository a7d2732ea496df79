import { Inject, Injectable } from '@nestjs/common';
import type { BulkJob, EnqueueOptions, Job, QueueCounts } from '../core/job';
import { executorFor, type TransactionTarget } from '../db/executor';
import { EMPTY_COUNTS, type JobMap, type Queue } from '../producer/queue';
import { PG_QUEUE_RUNTIME } from './pg-queue.constants';
import type { PgQueueRuntime } from './pg-queue.runtime';

/**
 * Enqueue into any queue by name, without injecting each `Queue`.
 * @example await queues.add('email', 'welcome', { userId: 42 }, { manager });
 */
@Injectable()
export class QueueService {
  constructor(@Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime) {}

  /** The producer of a queue (registered or not). */
  getQueue<TJobs extends JobMap = JobMap>(queue: string): Queue<TJobs> {
    return this.runtime.queue(queue) as unknown as Queue<TJobs>;
  }

  async add<TPayload = unknown>(queue: string, name: string, payload: TPayload, opts?: EnqueueOptions): Promise<Job<TPayload>> {
    return this.getQueue<Record<string, TPayload>>(queue).add(name, payload, opts);
  }

  async addBulk<TPayload = unknown>(queue: string, jobs: readonly BulkJob<string, TPayload>[], target?: TransactionTarget): Promise<Job<TPayload>[]> {
    return this.getQueue<Record<string, TPayload>>(queue).addBulk(jobs, target);
  }

  /**
   * Figures of every queue that has jobs or is registered here, in one query: what a health
   * probe or a metrics scrape reads.
   */
  async getCounts(): Promise<Record<string, QueueCounts>> {
    const found = await this.runtime.store.counts(null);
    const out: Record<string, QueueCounts> = {};
    for (const q of this.runtime.registeredQueues) out[q.name] = EMPTY_COUNTS;
    for (const [name, c] of found) out[name] = c;
    return out;
  }

  /** Any job by id, live or finished; null when unknown. */
  getJob<TPayload = unknown>(id: string, target?: TransactionTarget): Promise<Job<TPayload> | null> {
    return this.runtime.store.getJob<TPayload>(String(id), executorFor(target));
  }
}
