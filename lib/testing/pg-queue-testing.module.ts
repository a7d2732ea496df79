import { Module, type DynamicModule } from '@nestjs/common';
import { PgQueueConfigError } from '../core/errors';
import { PG_QUEUE_TESTING, type PgQueueTestMode } from '../module/pg-queue.constants';
import { PgQueueTester } from './pg-queue-tester';

/** Options of `PgQueueTestingModule.forRoot`. */
export interface PgQueueTestingOptions {
  /**
   * The shutdown grace period in tests (replaces the app's `shutdownTimeoutMs`): how long
   * `app.close()` waits for a handler still running (one a test left unawaited). @default 1000
   */
  readonly shutdownTimeoutMs?: number;
}

/**
 * Test mode for an app's `PgQueueModule`: import it next to the app's module in
 * `Test.createTestingModule`. The app's workers are created with their real handlers, but run
 * jobs only when the test asks through `PgQueueTester` (no polling, no LISTEN connection, no
 * heartbeat, maintenance or cron timers), and `app.close()` returns quickly.
 * @example
 * const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
 * const app = await moduleRef.createNestApplication().init();
 * const tester = app.get(PgQueueTester);
 */
@Module({})
export class PgQueueTestingModule {
  /**
   * The test mode's module: global, it provides `PgQueueTester`. `shutdownTimeoutMs` bounds the
   * wait of `app.close()` for a job still running (@default 1000).
   */
  static forRoot(options: PgQueueTestingOptions = {}): DynamicModule {
    const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 1000;
    if (!Number.isInteger(shutdownTimeoutMs) || shutdownTimeoutMs < 0) {
      throw new PgQueueConfigError(
        'PgQueueTestingModule.forRoot: shutdownTimeoutMs must be a whole number of milliseconds >= 0, ' +
          `not ${String(options.shutdownTimeoutMs)}.`,
      );
    }
    const mode: PgQueueTestMode = { shutdownTimeoutMs };
    return {
      module: PgQueueTestingModule,
      global: true,
      providers: [{ provide: PG_QUEUE_TESTING, useValue: mode }, PgQueueTester],
      exports: [PG_QUEUE_TESTING, PgQueueTester],
    };
  }
}
