// The module's own DI tokens. The queue token (getQueueToken) and the decorators' metadata keys
// are in lib/core/tokens.ts, since the decorators and discovery read them too.

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
