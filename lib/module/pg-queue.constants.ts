// The decorators' metadata keys and the queue token names live in core (the decorators import
// nothing above it); exported here too, beside the runtime's tokens, for the module's readers.
export {
  getQueueToken,
  INJECT_QUEUE_METADATA,
  ON_QUEUE_EVENT_METADATA,
  PROCESS_METADATA,
  PROCESSOR_METADATA,
} from '../core/tokens';

/** DI token of the per-application runtime (pool, store, supervisor). */
export const PG_QUEUE_RUNTIME = Symbol('PG_QUEUE_RUNTIME');

/**
 * DI token of the test mode that `PgQueueTestingModule.forRoot()` (nestjs-pg-queue/testing)
 * provides; when present, the runtime starts its workers in manual mode.
 */
export const PG_QUEUE_TESTING = Symbol('PG_QUEUE_TESTING');

/** What `PG_QUEUE_TESTING` holds: the test mode's settings, resolved. */
export interface PgQueueTestMode {
  readonly shutdownTimeoutMs: number;
}
