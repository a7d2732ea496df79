import { Injectable, UnprocessableEntityException } from '@nestjs/common';
import { DataSource } from 'typeorm';
// An installed app imports these from 'nestjs-pg-queue'.
import { InjectQueue, Queue, type JobState } from '../lib';
import type { OrderJobs } from './confirmation.processor';
import { EmailLog } from './email-log.entity';
import { Order } from './order.entity';
import type { WarehouseJobs } from './warehouse.processor';

/** What `GET /orders/:id` returns. */
export interface OrderView {
  order: Order;
  /** null once the queue has pruned the finished job (completed jobs are kept one day). */
  job: { id: string; state: JobState; attempt: number } | null;
  /** The stock reservation: retried with backoff, so `attempt` climbs to 3 (see warehouse.processor.ts). */
  warehouseJob: { id: string; state: JobState; attempt: number; errors: string[] } | null;
  email: EmailLog | null;
}

@Injectable()
export class OrdersService {
  constructor(
    private readonly dataSource: DataSource,
    @InjectQueue('orders') private readonly orders: Queue<OrderJobs>,
    @InjectQueue('warehouse') private readonly warehouse: Queue<WarehouseJobs>,
  ) {}

  /**
   * Saves the order and enqueues its confirmation in ONE transaction (the outbox pattern): both
   * exist or neither does. `fail` throws after the enqueue, to show the rollback taking the job too.
   */
  async place(item: string, fail: boolean): Promise<OrderView> {
    return this.dataSource.transaction(async (manager) => {
      const order = await manager.save(manager.create(Order, { item }));
      // `{ manager }` runs the insert (and the workers' wake-up) in this transaction.
      const job = await this.orders.add('send-confirmation', { orderId: order.id }, { manager });
      const reserve = await this.warehouse.add('reserve-stock', { orderId: order.id, item }, { manager });
      await manager.update(Order, order.id, { jobId: job.id, warehouseJobId: reserve.id });
      order.jobId = job.id;
      order.warehouseJobId = reserve.id;
      if (fail) {
        throw new UnprocessableEntityException(
          `Order ${order.id} failed after its job ${job.id} was enqueued ("fail": true), so the ` +
            'transaction rolled back: neither the order nor the job exists, and no email will be sent.',
        );
      }
      return {
        order,
        job: { id: job.id, state: job.state, attempt: job.attempt },
        warehouseJob: { id: reserve.id, state: reserve.state, attempt: reserve.attempt, errors: [] },
        email: null,
      };
    });
  }

  /** The order, the state of its job and the email it caused; null if there is no such order. */
  async find(id: number): Promise<OrderView | null> {
    const order = await this.dataSource.getRepository(Order).findOneBy({ id });
    if (!order) return null;
    const job = order.jobId ? await this.orders.getJob(order.jobId) : null;
    const reserve = order.warehouseJobId ? await this.warehouse.getJob(order.warehouseJobId) : null;
    const email = await this.dataSource.getRepository(EmailLog).findOneBy({ orderId: id });
    return {
      order,
      job: job && { id: job.id, state: job.state, attempt: job.attempt },
      warehouseJob: reserve && {
        id: reserve.id,
        state: reserve.state,
        attempt: reserve.attempt,
        errors: reserve.errors.map((e) => e.message),
      },
      email,
    };
  }
}
