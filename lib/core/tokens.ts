/**
 * Metadata keys and queue token names: the decorators write them, discovery reads them and the
 * module provides by them. In core so that the decorators (metadata only) import nothing that
 * runs; lib/module/pg-queue.constants.ts re-exports them beside the runtime's own tokens.
 */

/** Metadata key written by `@Processor`. */
export const PROCESSOR_METADATA = 'nestjs-pg-queue:processor';
/** Metadata key written by `@Process`. */
export const PROCESS_METADATA = 'nestjs-pg-queue:process';

/**
 * The DI token of a registered queue: the single source of these names, so other libraries
 * and tests can use it (`moduleRef.get(getQueueToken('email'))`).
 */
export function getQueueToken(name: string): string {
  return `PgQueue:${name}`;
}

/** Metadata key written by `@OnQueueEvent`. */
export const ON_QUEUE_EVENT_METADATA = 'nestjs-pg-queue:on-queue-event';

/** Metadata key written by `@InjectQueue`: the queues a class injects, checked at boot. */
export const INJECT_QUEUE_METADATA = 'nestjs-pg-queue:inject-queue';
