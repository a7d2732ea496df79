import { Module, type DynamicModule } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
// An installed app imports this from 'nestjs-pg-queue'.
import { PgQueueModule } from '../lib';
import { ConfirmationProcessor } from './confirmation.processor';
import { WarehouseProcessor } from './warehouse.processor';
import { EmailLog } from './email-log.entity';
import { Order } from './order.entity';
import { OrdersController } from './orders.controller';
import { OrdersService } from './orders.service';

/** The whole sample. `forRoot(url)` so main.ts and the e2e test choose the database. */
@Module({})
export class AppModule {
  static forRoot(databaseUrl: string): DynamicModule {
    return {
      module: AppModule,
      imports: [
        // synchronize creates the sample's tables; a real app uses migrations.
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [Order, EmailLog], synchronize: true }),
        // No connection given: the queue reuses the default DataSource's settings (its own small
        // pool) and creates its tables (schema "pgqueue") at boot.
        PgQueueModule.forRoot({}),
        PgQueueModule.registerQueue(
          { name: 'orders' },
          // Retries: 3 attempts, 300 ms apart (see warehouse.processor.ts).
          { name: 'warehouse', defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 300 } } },
        ),
      ],
      controllers: [OrdersController],
      providers: [OrdersService, ConfirmationProcessor, WarehouseProcessor],
    };
  }
}
