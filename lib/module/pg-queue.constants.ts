/** Metadata key written by `@Processor`. */
export const PROCESSOR_METADATA = 'nestjs-pg-queue:processor';
/** Metadata key written by `@Process`. */
export const PROCESS_METADATA = 'nestjs-pg-queue:process';
/** DI token of the per-application runtime (pool, store, supervisor). */
export const PG_QUEUE_RUNTIME = Symbol('PG_QUEUE_RUNTIME');

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

/**
 * DI token of the test mode that `PgQueueTestingModule.forRoot()` (nestjs-pg-queue/testing)
 * provides; when present, the runtime starts its workers in manual mode.
 */
export const PG_QUEUE_TESTING = Symbol('PG_QUEUE_TESTING');

/** What `PG_QUEUE_TESTING` holds: the test mode's settings, resolved. */
export interface PgQueueTestMode {
  readonly shutdownTimeoutMs: number;
}
