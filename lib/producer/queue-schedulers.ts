import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import {
  stepOf,
  validateSchedulerId,
  type JobScheduler,
  type JobSchedulerRepeat,
  type JobSchedulerTemplate,
} from '../core/job-scheduler';
import type { TransactionTarget } from '../db/executor';
import { QueueOperations, type JobMap } from './queue-operations';
import { buildSchedulerRow } from './scheduler-row';
import * as USE from './transaction-uses';

/**
 * A queue's job schedulers (BullMQ 6's names), which `Queue` inherits: read them as `Queue`'s own.
 * @internal
 */
export abstract class QueueSchedulers<TJobs extends JobMap = JobMap> extends QueueOperations<TJobs> {
  /**
   * Creates or replaces the job scheduler `id` of this queue (BullMQ's `upsertJobScheduler`):
   * every tick of `repeat` enqueues one job from `template`, once across every node. Upserting
   * the same timing again keeps the next tick (safe at every boot); a new timing starts over.
   * Stored in the database, so it survives restarts; per-tenant ids welcome. With `{ manager }`
   * or `{ client }` it joins that transaction. Returns the stored scheduler (BullMQ returns the
   * first job: here the first job is enqueued by the tick, at once for `every` or `immediately`).
   * @example
   * await queue.upsertJobScheduler('report:tenant-42', { pattern: '0 3 * * *', tz: 'Europe/Berlin' },
   *   { name: 'report', payload: { tenantId: 42 } });
   */
  async upsertJobScheduler<N extends keyof TJobs & string>(
    id: string,
    repeat: JobSchedulerRepeat,
    template: JobSchedulerTemplate<TJobs[N]> & { readonly name: N },
    target?: TransactionTarget,
  ): Promise<JobScheduler<TJobs[N]>> {
    const row = buildSchedulerRow(this.name, id, repeat, template, this.defaults, this.maxPayloadBytes, 'runtime');
    const out = await this.store.schedulers.upsert<TJobs[N]>(row, this.target(target, USE.UPSERT_SCHEDULER));
    if (!out) {
      throw new PgQueueConfigError(
        `upsertJobScheduler(${quote(id)}) of queue "${this.name}": a scheduler declared in code (@Process({ cron }) or ` +
          `registerQueue({ repeat })) holds this id; change it in code, or pick another id.`,
      );
    }
    return out;
  }

  /** The job scheduler `id` of this queue, or null (BullMQ's `getJobScheduler`). */
  async getJobScheduler<T = unknown>(id: string, target?: TransactionTarget): Promise<JobScheduler<T> | null> {
    validateSchedulerId(`getJobScheduler() of queue "${this.name}"`, id);
    return this.store.schedulers.get<T>(this.name, id, this.target(target));
  }

  /**
   * This queue's job schedulers by next tick (BullMQ's `getJobSchedulers(start, end, asc)`):
   * `start` and `end` are inclusive indexes, `end` -1 for all.
   */
  async getJobSchedulers<T = unknown>(start = 0, end = -1, asc = true): Promise<JobScheduler<T>[]> {
    const where = `getJobSchedulers() of queue "${this.name}"`;
    if (!Number.isSafeInteger(start) || start < 0)
      throw new PgQueueConfigError(`${where}: start must be an index, 0 or more; got ${quote(start)}.`);
    if (!Number.isSafeInteger(end) || end < -1)
      throw new PgQueueConfigError(`${where}: end must be an index, or -1 for all; got ${quote(end)}.`);
    if (typeof asc !== 'boolean') throw new PgQueueConfigError(`${where}: asc must be true or false; got ${quote(asc)}.`);
    if (end !== -1 && end < start) return [];
    return this.store.schedulers.list<T>(this.name, start, end === -1 ? null : end - start + 1, asc);
  }

  /** How many job schedulers this queue has (BullMQ's `getJobSchedulersCount`). */
  getJobSchedulersCount(): Promise<number> {
    return this.store.schedulers.countOf(this.name);
  }

  /**
   * Removes the job scheduler `id` (BullMQ's `removeJobScheduler`): no tick after this; jobs it
   * already enqueued stay. False when there is none. A code-declared one comes back at the next
   * boot of an app that declares it: remove it from code.
   */
  async removeJobScheduler(id: string, target?: TransactionTarget): Promise<boolean> {
    validateSchedulerId(`removeJobScheduler() of queue "${this.name}"`, id);
    return this.store.schedulers.remove(this.name, id, this.target(target, USE.REMOVE_SCHEDULER));
  }

  /** Pauses the job scheduler `id`: no tick until `resumeJobScheduler`. False when there is none. */
  async pauseJobScheduler(id: string): Promise<boolean> {
    validateSchedulerId(`pauseJobScheduler() of queue "${this.name}"`, id);
    return this.store.schedulers.setPaused(this.name, id, true);
  }

  /**
   * Resumes a paused job scheduler. Ticks that passed while it was paused are skipped: it goes on
   * from its first tick from now (at once for `every`). False when there is none.
   */
  async resumeJobScheduler(id: string): Promise<boolean> {
    const s = await this.getJobScheduler(id);
    if (!s) return false;
    const now = new Date();
    const next = s.every !== null ? null : stepOf({ pattern: s.pattern, everyMs: null, tz: s.tz }, 'resumeJobScheduler()')(now);
    return this.store.schedulers.setPaused(this.name, id, false, next);
  }

  /**
   * Enqueues one job from the scheduler's template now, leaving its schedule as it is (the
   * dashboard's "run now"). The new job's id, or null when there is no such scheduler.
   */
  async runJobSchedulerNow(id: string): Promise<string | null> {
    validateSchedulerId(`runJobSchedulerNow() of queue "${this.name}"`, id);
    return this.store.schedulers.runNow(this.name, id);
  }
}
