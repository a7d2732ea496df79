import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { DashboardAssets } from './dashboard-assets';
import { createDashboardController } from './dashboard.controller';
import { DashboardInputFilter } from './dashboard-input.filter';
import { createDashboardOperationsController } from './dashboard-operations.controller';
import { DashboardOperations } from './dashboard-operations.service';
import {
  PG_QUEUE_DASHBOARD_OPTIONS,
  resolveDashboardOptions,
  resolveDashboardPath,
  type PgQueueDashboardAsyncOptions,
  type PgQueueDashboardOptions,
  type ResolvedDashboardOptions,
} from './dashboard.options';
import { DashboardService } from './dashboard.service';

/**
 * A web dashboard of every queue, job, schedule and node, with a JSON API for scripts. Import it
 * next to `PgQueueModule.forRoot`; it reads through the queue's own pool. It refuses to boot until
 * you say who may use it: `guards`, `authorize`, or `public: true` (local development).
 * @example
 * import { PgQueueDashboardModule } from 'nestjs-pg-queue/dashboard';
 *
 * PgQueueDashboardModule.register({ path: '/queues', guards: [AdminGuard] })
 * PgQueueDashboardModule.register({ authorize: (req, action) => action === 'read', readOnly: true })
 */
@Module({})
export class PgQueueDashboardModule {
  /** Mounts the dashboard at `options.path` (default '/queues'); bad options throw here. */
  static register(options: PgQueueDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    return build(resolved.path, resolved, { provide: PG_QUEUE_DASHBOARD_OPTIONS, useValue: resolved }, []);
  }

  /** Like `register`, the options (but the path and guards) from a factory; bad options fail the boot. */
  static registerAsync(options: PgQueueDashboardAsyncOptions): DynamicModule {
    const path = resolveDashboardPath(options.path);
    const guards = options.guards ?? [];
    const provider: Provider = {
      provide: PG_QUEUE_DASHBOARD_OPTIONS,
      inject: options.inject ?? [],
      useFactory: async (...args: unknown[]) => resolveDashboardOptions({ ...(await options.useFactory(...args)), path, guards }),
    };
    return build(path, { guards }, provider, options.imports ?? []);
  }
}

function build(
  path: string,
  o: Pick<ResolvedDashboardOptions, 'guards'>,
  options: Provider,
  imports: DynamicModule['imports'],
): DynamicModule {
  return {
    module: PgQueueDashboardModule,
    imports,
    controllers: [createDashboardController(path, o.guards), createDashboardOperationsController(path, o.guards)],
    providers: [
      options,
      DashboardService,
      DashboardOperations,
      DashboardAccessGuard,
      DashboardInputFilter,
      {
        provide: DashboardAssets,
        inject: [PG_QUEUE_DASHBOARD_OPTIONS],
        useFactory: (opts: ResolvedDashboardOptions) => new DashboardAssets(opts),
      },
    ],
    exports: [DashboardService],
  };
}
