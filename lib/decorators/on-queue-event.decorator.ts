import { SetMetadata } from '@nestjs/common';
import { PgQueueConfigError } from '../core/errors';
import { ON_QUEUE_EVENT_METADATA } from '../core/tokens';
import { validateQueueName } from '../core/pg-queue.options';
import { quote } from '../core/input-text';

/**
 * Job lifecycle events in this process. Listener arguments:
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
export type QueueEventName =
  'active' | 'progress' | 'completed' | 'retrying' | 'failed' | 'cancelled' | 'snoozed' | 'stalled' | 'outcomeDropped';

export interface OnQueueEventMetadata {
  readonly event: QueueEventName;
  /** Only events of this queue; all queues when omitted. */
  readonly queue?: string;
}

const EVENTS: readonly QueueEventName[] = [
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
 * Calls the decorated method of any provider on a job lifecycle event. A listener that throws
 * is logged and never affects the job.
 * @example
 * @OnQueueEvent('failed', { queue: 'email' })
 * alert(job: Job, error: JobAttemptError) { ... }
 */
export function OnQueueEvent(event: QueueEventName, options: { queue?: string } = {}): MethodDecorator {
  if (!EVENTS.includes(event)) {
    throw new PgQueueConfigError(`@OnQueueEvent(${quote(event)}): unknown event; use one of ${EVENTS.join(', ')}.`);
  }
  if (options.queue !== undefined) validateQueueName(options.queue);
  return SetMetadata(ON_QUEUE_EVENT_METADATA, { event, queue: options.queue } satisfies OnQueueEventMetadata);
}
