// The names that the decorators write and discovery and the module read: here, below all three,
// so that none of them imports another's folder for a string (discovery and the decorators used
// to import lib/module for these, while lib/module imports discovery).

/** Metadata key written by `@Processor`. */
export const PROCESSOR_METADATA = 'nestjs-pg-queue:processor';
/** Metadata key written by `@Process`. */
export const PROCESS_METADATA = 'nestjs-pg-queue:process';
/** Metadata key written by `@OnQueueEvent` (cross-process events). */
export const ON_QUEUE_EVENT_METADATA = 'nestjs-pg-queue:on-queue-event';
/** Metadata key written by `@OnWorkerEvent` (events of the jobs this process runs). */
export const ON_WORKER_EVENT_METADATA = 'nestjs-pg-queue:on-worker-event';
/** Metadata key written by `@InjectQueue`: the queues a class injects, checked at boot. */
export const INJECT_QUEUE_METADATA = 'nestjs-pg-queue:inject-queue';

/**
 * The DI token of a registered queue: the single source of these names, so other libraries
 * and tests can use it (`moduleRef.get(getQueueToken('email'))`).
 */
export function getQueueToken(name: string): string {
  return `PgQueue:${name}`;
}
