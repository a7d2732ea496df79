import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One confirmation email "sent" (the sample records it instead of talking to a mail server). */
@Entity('email_logs')
export class EmailLog {
  @PrimaryGeneratedColumn()
  id!: number;

  /** Unique: at most one confirmation per order, even if the job runs twice. */
  @Column('int', { name: 'order_id', unique: true })
  orderId!: number;

  @Column('text')
  message!: string;

  @CreateDateColumn({ name: 'sent_at', type: 'timestamptz' })
  sentAt!: Date;
}
