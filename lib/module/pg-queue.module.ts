import { Logger, Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DiscoveryModule, ModuleRef } from '@nestjs/core';
import { isDataSourceLike, resolveConnection } from '../db/connection';
import { PgQueueExplorer } from '../discovery/pg-queue.explorer';
import { PgQueueConfigError } from '../core/errors';
import { getQueueToken } from '../core/tokens';
import { PG_QUEUE_RUNTIME, PG_QUEUE_TESTING, type PgQueueTestMode } from './pg-queue.constants';
import { PG_QUEUE_MODULE_OPTIONS, PgQueueConfigurableModule } from './pg-queue.module-definition';
import { DEFAULT_CONNECTION, planConnections } from '../core/connections';
import type { DataSourceLike, PgQueueModuleOptions, RegisterQueueOptions } from '../core/options/types';
import { DEFAULTS } from '../core/options/defaults';
import { resolveQueueOptions } from '../core/options/module-checks';
import { PgQueueRuntime } from './pg-queue.runtime';
import { clsTransaction } from './cls-transaction';
import { QueueService } from './queue.service';

/**
 * The token of the app's default TypeORM DataSource: exactly what `@nestjs/typeorm` registers
 * (`getDataSourceToken()`), else TypeORM's DataSource class, which is that token. Both are
 * optional peers: without them, nothing is injected and `connection` must be given.
 */
function defaultDataSourceToken(): unknown {
  /* eslint-disable @typescript-eslint/no-require-imports */
  try {
    return (require('@nestjs/typeorm') as { getDataSourceToken(): unknown }).getDataSourceToken();
  } catch {
    try {
      return (require('typeorm') as { DataSource: unknown }).DataSource;
    } catch {
      return Symbol('typeorm-not-installed');
    }
  }
  /* eslint-enable @typescript-eslint/no-require-imports */
}

const runtimeProvider: Provider = {
  provide: PG_QUEUE_RUNTIME,
  inject: [
    PG_QUEUE_MODULE_OPTIONS,
    ModuleRef,
    { token: defaultDataSourceToken() as string, optional: true },
    { token: PG_QUEUE_TESTING, optional: true },
  ],
  useFactory: async (
    options: PgQueueModuleOptions,
    moduleRef: ModuleRef,
    defaultDataSource?: DataSourceLike,
    testMode?: PgQueueTestMode,
  ) => {
    const connections = planConnections(options).map((plan) => {
      let resolved = plan.options;
      // PgQueueTestingModule: no LISTEN connection, a short grace period; the workers run manually.
      if (testMode) resolved = { ...resolved, listen: false, shutdownTimeoutMs: testMode.shutdownTimeoutMs };
      const dataSource = dataSourceOf(plan.raw, moduleRef, plan.name === DEFAULT_CONNECTION ? defaultDataSource : undefined);
      return { name: plan.name, options: resolved, conn: resolveConnection(plan.raw, dataSource, plan.name) };
    });
    const runtime = await PgQueueRuntime.create(connections, new Logger('PgQueue'));
    runtime.ambientTransaction = clsTransaction(moduleRef);
    if (testMode) for (const c of runtime.connections) c.supervisor.setManual();
    return runtime;
  },
};

/** The DataSource whose settings a connection reuses: given, looked up by token, or the app's default. */
function dataSourceOf(
  options: PgQueueModuleOptions,
  moduleRef: ModuleRef,
  fallback: DataSourceLike | undefined,
): DataSourceLike | undefined {
  if (options.connection !== undefined) return undefined;
  if (isDataSourceLike(options.dataSource)) return options.dataSource;
  if (options.dataSource === undefined) return fallback;
  try {
    return moduleRef.get(options.dataSource as string, { strict: false }) as DataSourceLike;
  } catch (err) {
    throw new PgQueueConfigError(
      `dataSource token ${String(options.dataSource)} is not provided. Pass the DataSource itself, ` +
        'e.g. forRootAsync({ inject: [getDataSourceToken(name)], useFactory: (dataSource) => ({ dataSource }) }).',
      { cause: err },
    );
  }
}

/** Holds the providers of `registerQueue` calls (separate from the root, so it is created once). */
@Module({})
export class PgQueueQueuesModule {}

/**
 * The queue module. Import `forRoot` (or `forRootAsync`) once, at the root; it is global.
 * Register each queue with `registerQueue` in the module that uses it.
 * @example
 * PgQueueModule.forRoot({ connection: process.env.DATABASE_URL })
 * PgQueueModule.registerQueue({ name: 'email', concurrency: 5 })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [runtimeProvider, QueueService, PgQueueExplorer],
  exports: [PG_QUEUE_RUNTIME, QueueService],
})
export class PgQueueModule extends PgQueueConfigurableModule {
  /** Registers queues: each becomes injectable with `@InjectQueue(name)`. */
  static registerQueue(...queues: RegisterQueueOptions[]): DynamicModule {
    const providers: Provider[] = queues.map((q) => {
      // Validate now, when the module graph is declared, so a typo fails with its own message.
      const name = resolveQueueOptions(q, DEFAULTS.job).name;
      return {
        provide: getQueueToken(name),
        inject: [PG_QUEUE_RUNTIME],
        useFactory: async (runtime: PgQueueRuntime) => {
          try {
            return runtime.registerQueue(q);
          } catch (err) {
            // A failed boot (say, an undeclared connection) must not leave the pools open behind it.
            await runtime.close();
            throw err;
          }
        },
      };
    });
    return { module: PgQueueQueuesModule, providers, exports: providers };
  }
}
