import { Logger } from '@nestjs/common';
// An installed app imports these from 'nestjs-pg-queue'.
import { Process, Processor, type ActiveJob } from '../lib';

/** The jobs of the `warehouse` queue and their payloads. */
export type WarehouseJobs = { 'reserve-stock': { orderId: number; item: string } };

/**
 * Shows retries. The "warehouse API" times out on the first two attempts of every job, so each
 * job succeeds on its third, after the queue's backoff (app.module.ts: 3 attempts, 300 ms fixed).
 * An item containing "unobtainium" fails every attempt and ends `failed`, its three errors kept.
 * Each attempt writes a line to the job's log (`job.log`), shown on the dashboard's job page.
 */
@Processor('warehouse')
export class WarehouseProcessor {
  private readonly logger = new Logger(WarehouseProcessor.name);

  @Process('reserve-stock')
  reserve(job: ActiveJob<WarehouseJobs['reserve-stock']>) {
    job.log(`attempt ${job.attempt}: reserving ${job.payload.item} for order ${job.payload.orderId}`);
    if (job.payload.item.includes('unobtainium')) {
      throw new Error(`No such item in the warehouse: ${job.payload.item}`);
    }
    if (job.attempt < 3) {
      this.logger.warn(`Job ${job.id}: warehouse API timed out (simulated), attempt ${job.attempt} of ${job.maxAttempts}`);
      throw new Error('Warehouse API timed out (simulated)');
    }
    this.logger.log(`Job ${job.id}: stock reserved for order ${job.payload.orderId} on attempt ${job.attempt}`);
    return { reserved: job.payload.item };
  }
}
