import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
// An installed app imports these from 'nestjs-pg-queue'.
import { Process, Processor, type Job } from '../lib';
import { EmailLog } from './email-log.entity';
import { Order } from './order.entity';

/** The jobs of the `orders` queue and their payloads; `Queue<OrderJobs>` checks both. */
export type OrderJobs = {
  'send-confirmation': { orderId: number };
};

/** The worker of the `orders` queue: runs in this process, started and stopped with the app. */
@Processor('orders')
export class ConfirmationProcessor {
  private readonly logger = new Logger(ConfirmationProcessor.name);

  constructor(private readonly dataSource: DataSource) {}

  @Process('send-confirmation')
  async sendConfirmation(job: Job<OrderJobs['send-confirmation']>): Promise<{ emailLogId: number }> {
    const { orderId } = job.payload;
    const emailLogId = await this.dataSource.transaction(async (manager) => {
      // The order exists: it was committed in the same transaction as this job.
      const order = await manager.findOneByOrFail(Order, { id: orderId });
      // A job runs at least once: if the process dies after this commit but before the queue
      // records the job as completed, it runs again. ON CONFLICT DO NOTHING on the unique
      // order_id makes that second run harmless (a real mailer would get an idempotency key).
      await manager
        .createQueryBuilder()
        .insert()
        .into(EmailLog)
        .values({ orderId, message: `Your order #${orderId} (${order.item}) is confirmed.` })
        .orIgnore()
        .execute();
      await manager.update(Order, orderId, { status: 'confirmed' });
      return (await manager.findOneByOrFail(EmailLog, { orderId })).id;
    });
    this.logger.log(`Job ${job.id}: confirmation for order ${orderId} sent (attempt ${job.attempt})`);
    return { emailLogId }; // stored as the job's result
  }
}
