import { Module, type DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type { RegisterQueueOptions } from '../core/options/types';
import { PgQueueExplorer } from '../discovery/pg-queue.explorer';
import { PG_QUEUE_RUNTIME } from './pg-queue.constants';
import {
  PgQueueConfigurableModule,
  type PgQueueForRootAsyncOptions,
  type PgQueueForRootOptions,
} from './pg-queue.module-definition';
import { PgQueueLifecycle } from './pg-queue.lifecycle';
import { asyncQueueProvider, mayUseDefaultDataSource, queueProviders, runtimeProvider } from './pg-queue.providers';
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
  providers: [QueueService, PgQueueExplorer, PgQueueLifecycle],
  exports: [PG_QUEUE_RUNTIME, QueueService],
})
export class PgQueueModule extends PgQueueConfigurableModule {
  /**
   * The module, at the root, with its options. The runtime's provider comes with each call: it
   * looks up the app's default TypeORM DataSource only where these options may use it (no
   * `connection` and no `dataSource` of their own), so an app that gives its connection does not
   * load TypeORM for it.
   */
  static forRoot(options: PgQueueForRootOptions): DynamicModule {
    return withRuntime(super.forRoot(options), mayUseDefaultDataSource(options));
  }

  /** As forRoot, with options from a factory: they are read at boot, so the default DataSource may be used. */
  static forRootAsync(options: PgQueueForRootAsyncOptions): DynamicModule {
    return withRuntime(super.forRootAsync(options), true);
  }

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

function withRuntime(m: DynamicModule, withDefaultDataSource: boolean): DynamicModule {
  return { ...m, providers: [...(m.providers ?? []), runtimeProvider(withDefaultDataSource)] };
}
