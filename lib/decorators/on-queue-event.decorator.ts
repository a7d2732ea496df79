import { SetMetadata } from '@nestjs/common';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import { validateQueueName } from '../core/names';
import { QUEUE_EVENT_KINDS, type QueueEventName } from '../core/queue-events';
import { ON_QUEUE_EVENT_METADATA } from '../core/tokens';

/** What `@OnQueueEvent` stores. */
export interface OnQueueEventMetadata {
  readonly event: QueueEventName;
  /** Only events of this queue; every registered queue when omitted. */
  readonly queue?: string;
}

/** Every cross-process event name. */
const QUEUE_EVENTS: readonly QueueEventName[] = [...QUEUE_EVENT_KINDS, 'lagged'];
/** Names that exist only in the process that ran the job: `@OnWorkerEvent` takes them. */
const WORKER_ONLY = ['active', 'outcomeDropped'];

/**
 * Calls the decorated method of any provider on a job event written by any process: the
 * cross-process listener, `@nestjs/bullmq`'s `@OnQueueEvent` on a `QueueEventsHost`. Works in a
 * producer-only app (`workers: false`); every event is confirmed by a read of the job's row
 * before it fires. Listener arguments are `QueueEventMap`'s (`completed(job, result)`,
 * `failed(job, error)`, `retrying(job, error)`, `progress(job, value)`, `lagged(lag)`, ...).
 * Needs the LISTEN connection (not `listen: false`). For the events of the jobs this process
 * runs, synchronously and with `active`, use `@OnWorkerEvent`.
 * @example
 * @OnQueueEvent('completed', { queue: 'exports' })
 * ready(job: Job, result: unknown) { this.notifyUser(job.payload, result); }
 */
export function OnQueueEvent(event: QueueEventName, options: { queue?: string } = {}): MethodDecorator {
  if (WORKER_ONLY.includes(event)) {
    throw new PgQueueConfigError(
      `@OnQueueEvent(${quote(event)}): ${quote(event)} exists only in the process that runs the job; ` +
        `use @OnWorkerEvent(${quote(event)}) for it. @OnQueueEvent takes ${QUEUE_EVENTS.join(', ')}.`,
    );
  }
  if (!QUEUE_EVENTS.includes(event)) {
    throw new PgQueueConfigError(`@OnQueueEvent(${quote(event)}): unknown event; use one of ${QUEUE_EVENTS.join(', ')}.`);
  }
  if (options.queue !== undefined) validateQueueName(options.queue);
  return SetMetadata(ON_QUEUE_EVENT_METADATA, { event, queue: options.queue } satisfies OnQueueEventMetadata);
}
