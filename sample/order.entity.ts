import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type OrderStatus = 'pending' | 'confirmed';

@Entity('orders')
export class Order {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column('text')
  item!: string;

  /** `pending` until the `send-confirmation` job has run. */
  @Column('text', { default: 'pending' })
  status!: OrderStatus;

  /** The `send-confirmation` job enqueued with this order (a bigint, kept as a string). */
  @Column('bigint', { name: 'job_id', nullable: true })
  jobId!: string | null;

  /** The `reserve-stock` job of the `warehouse` queue, enqueued in the same transaction. */
  @Column('bigint', { name: 'warehouse_job_id', nullable: true })
  warehouseJobId!: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
