import { SetMetadata } from '@nestjs/common';
import { PgQueueConfigError } from '../core/errors';
import { ON_WORKER_EVENT_METADATA } from '../core/tokens';
import { validateQueueName } from '../core/names';
import { quote } from '../core/input-text';

/**
 * Job lifecycle events in this process (`@OnWorkerEvent`, BullMQ's worker events): fired by the
 * process that ran the job, synchronously after its outcome is written. Listener arguments:
 * - `active(job)`: a handler is starting;
 * - `progress(job, value)`: a handler on this node called `job.updateProgress(value)`;
 * - `completed(job, result)`;
 * - `retrying(job, error, delayMs)`: an attempt failed and another is scheduled;
 * - `failed(job, error)`: the last attempt failed;
 * - `stalled(stalledJob)`: the rescuer (on whichever node holds the maintenance lock, so
 *   possibly not the node that ran it) found an expired lease;
 * - `outcomeDropped(job, outcome)`: an attempt's outcome matched no row (its lease was lost).
 *
 * `completed`, `retrying`, `failed`, `cancelled` and `snoozed` fire once the outcome is written:
 * a listener that reads the job sees the state it is told about.
 */
export type WorkerEventName =
  'active' | 'progress' | 'completed' | 'retrying' | 'failed' | 'cancelled' | 'snoozed' | 'stalled' | 'outcomeDropped';

/** What `@OnWorkerEvent` stores. */
export interface OnWorkerEventMetadata {
  readonly event: WorkerEventName;
  /** Only events of this queue; all queues when omitted. */
  readonly queue?: string;
}

/** Every in-process event name. */
export const WORKER_EVENTS: readonly WorkerEventName[] = [
  'active',
  'progress',
  'completed',
  'retrying',
  'failed',
  'cancelled',
  'snoozed',
  'stalled',
  'outcomeDropped',
];

/**
 * Calls the decorated method of any provider on a job lifecycle event of a job this process ran
 * (`@nestjs/bullmq`'s `@OnWorkerEvent`). A listener that throws is logged and never affects the
 * job. For the events of every process (a producer-only app included), use `@OnQueueEvent`.
 * @example
 * @OnWorkerEvent('failed', { queue: 'email' })
 * alert(job: Job, error: JobAttemptError) { ... }
 */
export function OnWorkerEvent(event: WorkerEventName, options: { queue?: string } = {}): MethodDecorator {
  if (!WORKER_EVENTS.includes(event)) {
    throw new PgQueueConfigError(`@OnWorkerEvent(${quote(event)}): unknown event; use one of ${WORKER_EVENTS.join(', ')}.`);
  }
  if (options.queue !== undefined) validateQueueName(options.queue);
  return SetMetadata(ON_WORKER_EVENT_METADATA, { event, queue: options.queue } satisfies OnWorkerEventMetadata);
}
