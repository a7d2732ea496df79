import {
  checkSchedulerTemplate,
  firstTick,
  resolveSchedulerTiming,
  stepOf,
  validateSchedulerId,
  type JobSchedulerRepeat,
  type JobSchedulerTemplate,
} from '../core/job-scheduler';
import { PgQueueConfigError } from '../core/errors';
import type { ResolvedJobDefaults } from '../core/options/resolved';
import type { SchedulerRow } from '../db/job-schedulers';
import { buildJobRow } from './enqueue';

/**
 * A job scheduler as the row stored, every input checked (PgQueueConfigError saying what to
 * change): its timing, its job template resolved with the queue's defaults as add() would, and
 * its first tick from `now` (null: at once, by the database's clock).
 */
export function buildSchedulerRow(
  queue: string,
  id: string,
  repeat: JobSchedulerRepeat,
  template: JobSchedulerTemplate,
  defaults: ResolvedJobDefaults,
  maxPayloadBytes: number,
  source: 'code' | 'runtime',
  now = new Date(),
): SchedulerRow {
  const where = `upsertJobScheduler(${JSON.stringify(String(id)).slice(0, 80)}) of queue "${queue}"`;
  validateSchedulerId(where, id);
  const timing = resolveSchedulerTiming(where, repeat);
  const t = checkSchedulerTemplate(where, template);
  const job = buildJobRow(queue, t.name, t.payload, t.opts, defaults, maxPayloadBytes);
  const first = firstTick(timing, stepOf(timing, where), now);
  if (timing.endAt && (first ?? now) > timing.endAt) {
    throw new PgQueueConfigError(
      `${where}: endDate ${timing.endAt.toISOString()} is before the first tick (${(first ?? now).toISOString()}): it would never run.`,
    );
  }
  return {
    queue,
    id,
    pattern: timing.pattern,
    everyMs: timing.everyMs,
    tz: timing.tz,
    startAt: timing.startAt,
    endAt: timing.endAt,
    limit: timing.limit,
    jobName: t.name,
    payloadJson: job.payloadJson,
    opts: t.opts,
    resolved: {
      priority: job.priority,
      maxAttempts: job.maxAttempts,
      backoff: job.backoff,
      timeoutMs: job.timeoutMs,
      group: job.group,
    },
    firstRunAt: first,
    source,
  };
}
