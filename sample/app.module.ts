import { Module, type DynamicModule } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Registry } from 'prom-client';
// An installed app imports this from 'nestjs-pg-queue'.
import { PgQueueModule, type PgQueueModuleOptions } from '../lib';
import { PgQueueDashboardModule } from '../lib/dashboard';
import { PgQueueHealthIndicator } from '../lib/health';
import { PgQueueMetricsModule } from '../lib/metrics';
import { ConfirmationProcessor } from './confirmation.processor';
import { mayUseDashboard, QueueReaderGuard, SampleAuthGuard } from './dashboard.guards';
import { WarehouseProcessor } from './warehouse.processor';
import { EmailLog } from './email-log.entity';
import { HealthController } from './health.controller';
import { MetricsController } from './metrics.controller';
import { Order } from './order.entity';
import { OrdersController } from './orders.controller';
import { OrdersService } from './orders.service';

/**
 * The whole sample. `forRoot(url)` so main.ts and the e2e test choose the database; `queue`
 * adds PgQueueModule options (the health e2e test sends the queue's connections through a proxy
 * it can cut).
 */
@Module({})
export class AppModule {
  static forRoot(databaseUrl: string, queue: PgQueueModuleOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        // synchronize creates the sample's tables; a real app uses migrations.
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [Order, EmailLog], synchronize: true }),
        // No connection given: the queue reuses the default DataSource's settings (its own small
        // pool) and creates its tables (schema "pgqueue") at boot.
        PgQueueModule.forRoot(queue),
        PgQueueModule.registerQueue(
          { name: 'orders' },
          // Retries: 3 attempts, 300 ms apart (see warehouse.processor.ts).
          { name: 'warehouse', defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 300 } } },
        ),
        TerminusModule,
        // Queue metrics, served at GET /metrics. A registry per app (not prom-client's global one),
        // so two apps in one process, as in the tests, keep their counters apart.
        PgQueueMetricsModule.register({ registry: new Registry() }),
        // The web dashboard at /queues (nestjs-pg-queue/dashboard): the app's authentication sets
        // req.user (here a stand-in signing in requests from this machine), a guard lets queue
        // readers in, and authorize keeps the actions for admins (dashboard.guards.ts).
        PgQueueDashboardModule.register({
          path: '/queues',
          guards: [SampleAuthGuard, QueueReaderGuard],
          authorize: (req, action) => mayUseDashboard(req, action),
        }),
      ],
      controllers: [OrdersController, HealthController, MetricsController],
      providers: [OrdersService, ConfirmationProcessor, WarehouseProcessor, PgQueueHealthIndicator],
    };
  }
}
