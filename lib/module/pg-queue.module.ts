import { Module, type DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type { RegisterQueueOptions } from '../core/options/types';
import { PgQueueExplorer } from '../discovery/pg-queue.explorer';
import { PG_QUEUE_RUNTIME } from './pg-queue.constants';
import { PgQueueConfigurableModule } from './pg-queue.module-definition';
import { PgQueueLifecycle } from './pg-queue.lifecycle';
import { asyncQueueProvider, queueProviders, runtimeProvider } from './pg-queue.providers';
import type { RegisterQueueAsyncOptions } from './register-queue-async';
import { QueueService } from './queue.service';

/** Holds the providers of `registerQueue` calls (separate from the root, so it is created once). */
@Module({})
export class PgQueueQueuesModule {}

/**
 * The queue module. Import `forRoot` (or `forRootAsync`) once, at the root; it is global.
 * Register each queue with `registerQueue` in the module that uses it.
 *
 * Its parts: the runtime (pools, stores, supervisors: pg-queue.providers.ts), `QueueService`,
 * discovery of the decorated classes (lib/discovery), and the lifecycle that starts and stops
 * the workers with the app (pg-queue.lifecycle.ts).
 * @example
 * PgQueueModule.forRoot({ connection: process.env.DATABASE_URL })
 * PgQueueModule.registerQueue({ name: 'email', concurrency: 5 })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [runtimeProvider, QueueService, PgQueueExplorer, PgQueueLifecycle],
  exports: [PG_QUEUE_RUNTIME, QueueService],
})
export class PgQueueModule extends PgQueueConfigurableModule {
  /** Registers queues: each becomes injectable with `@InjectQueue(name)`. */
  static registerQueue(...queues: RegisterQueueOptions[]): DynamicModule {
    const providers = queueProviders(queues);
    return { module: PgQueueQueuesModule, providers, exports: providers };
  }

  /**
   * Registers a queue whose options come from other providers (a ConfigService): injectable with
   * `@InjectQueue(name)` as with `registerQueue`, its options validated at boot the same way.
   * @example
   * PgQueueModule.registerQueueAsync({
   *   name: 'email',
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ concurrency: config.get('EMAIL_CONCURRENCY') }),
   * })
   */
  static registerQueueAsync(options: RegisterQueueAsyncOptions): DynamicModule {
    const provider = asyncQueueProvider(options);
    return { module: PgQueueQueuesModule, imports: options.imports ?? [], providers: [provider], exports: [provider] };
  }
}
