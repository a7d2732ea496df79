import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { InjectQueue, Process, Processor, Queue, QueueService, type Job } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

const runs: { id: string; orderId: number }[] = [];

@Processor('email')
class EmailProcessor {
  @Process('confirm')
  confirm(job: Job<{ orderId: number }>) {
    runs.push({ id: job.id, orderId: job.payload.orderId });
  }
}

@Injectable()
class OrderService {
  /** The id the enqueue returned inside the last transaction, committed or not. */
  lastJobId: string | undefined;

  constructor(
    private readonly dataSource: DataSource,
    @InjectQueue('email') private readonly email: Queue<{ confirm: { orderId: number } }>,
  ) {}

  /** Saves an order and enqueues its email in one transaction; `fail` throws after the enqueue. */
  async place(orderId: number, fail: boolean): Promise<string> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query('INSERT INTO orders (id) VALUES ($1)', [orderId]);
      const job = await this.email.add('confirm', { orderId }, { manager });
      this.lastJobId = job.id;
      if (fail) throw new Error('payment declined');
      return job.id;
    });
  }
}

async function count(url: string, sql: string): Promise<number> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ n: number }>(sql)).rows[0].n;
  } finally {
    await c.end();
  }
}

describe('transactional enqueue (outbox)', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;

  beforeAll(async () => {
    db = await createTestDatabase();
    const c = new Client({ connectionString: db.url });
    await c.connect();
    await c.query('CREATE TABLE orders (id int PRIMARY KEY)');
    await c.end();
    app = await bootApp({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url })],
      // No connection given: the app's default TypeORM DataSource is used.
      options: { pollIntervalMs: 500 },
      queues: [{ name: 'email' }],
      providers: [EmailProcessor, OrderService],
    });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a job added in a transaction that rolls back is never visible and never runs', async () => {
    const orders = app.get(OrderService);
    await expect(orders.place(1, true)).rejects.toThrow('payment declined');
    const rolledBack = orders.lastJobId!;
    expect(rolledBack).toMatch(/^\d+$/);
    expect(await app.get(QueueService).getJob(rolledBack)).toBeNull();
    expect(await count(db.url, 'SELECT count(*)::int AS n FROM orders')).toBe(0);
    expect(await count(db.url, 'SELECT count(*)::int AS n FROM pgqueue.jobs')).toBe(0);

    // A committed order after it runs: the worker claimed after the rollback (woken by that
    // job's NOTIFY), and the rolled-back job was never there to claim.
    const committed = await orders.place(2, false);
    await waitFor(() => runs.some((r) => r.id === committed), { message: 'committed job to run' });
    await waitFor(async () => (await app.get(QueueService).getJob(committed))?.state === 'completed');
    expect(runs.filter((r) => r.orderId === 1)).toEqual([]);
    expect(await count(db.url, 'SELECT count(*)::int AS n FROM pgqueue.job_history')).toBe(1);
  });

  it('a job added in a committed transaction runs exactly once', async () => {
    const id = await app.get(OrderService).place(3, false);
    await waitFor(async () => (await app.get(QueueService).getJob(id))?.state === 'completed', {
      message: 'job to complete',
    });
    const job = await app.get(QueueService).getJob<{ orderId: number }>(id);
    expect(job).toMatchObject({ queue: 'email', name: 'confirm', payload: { orderId: 3 }, attempt: 1, errors: [] });
    expect(runs.filter((r) => r.id === id)).toHaveLength(1);
  });

  it('joins a node-postgres transaction with { client } the same way', async () => {
    const queue = app.get(QueueService);
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query('BEGIN');
      const rolled = await queue.add('email', 'confirm', { orderId: 10 }, { client: c });
      expect(await queue.getJob(rolled.id, { client: c })).not.toBeNull(); // visible inside
      expect(await queue.getJob(rolled.id)).toBeNull(); // invisible outside
      await c.query('ROLLBACK');
      expect(await queue.getJob(rolled.id)).toBeNull();

      await c.query('BEGIN');
      const kept = await queue.add('email', 'confirm', { orderId: 11 }, { client: c });
      await c.query('COMMIT');
      await waitFor(() => runs.some((r) => r.id === kept.id), { message: 'committed pg job to run' });
      expect(runs.filter((r) => r.orderId === 10)).toEqual([]);
    } finally {
      await c.end();
    }
  });

  it('addBulk inserts all jobs in one transaction or none', async () => {
    const queue = app.get(QueueService);
    await expect(
      app.get(DataSource).transaction(async (manager) => {
        await queue.addBulk(
          'email',
          [20, 21, 22].map((orderId) => ({ name: 'confirm', payload: { orderId } })),
          { manager },
        );
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    const jobs = await queue.addBulk(
      'email',
      [30, 31, 32].map((orderId) => ({ name: 'confirm', payload: { orderId } })),
    );
    expect(jobs.map((j) => j.payload.orderId)).toEqual([30, 31, 32]);
    await waitFor(() => [30, 31, 32].every((o) => runs.some((r) => r.orderId === o)), { message: 'bulk jobs to run' });
    expect(runs.filter((r) => r.orderId >= 20 && r.orderId <= 22)).toEqual([]);
    expect(runtimeOf(app).supervisor.running).toBe(true);
  });
});
