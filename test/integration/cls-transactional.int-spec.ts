import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import { ClsModule, ClsService } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectQueue, QueueService, type Job, type Queue, type TransactionTarget } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase } from '../support/database';

// With @nestjs-cls/transactional and its TypeORM adapter, add() inside a @Transactional() method
// joins the active transaction with no manager argument.

@Injectable()
class OrderService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @InjectQueue('mail') private readonly mail: Queue<{ confirm: { orderId: number } }>,
  ) {}

  @Transactional()
  async placeOrder(orderId: number, fail: boolean): Promise<void> {
    await this.txHost.tx.query('INSERT INTO orders (id) VALUES ($1)', [orderId]);
    await this.mail.add('confirm', { orderId });
    if (fail) throw new Error('payment declined');
  }

  /** The order in the CLS transaction, its job in the caller's `target` transaction. */
  @Transactional()
  async placeWithExplicit(orderId: number, target: TransactionTarget, how: 'add' | 'addBulk', fail: boolean): Promise<void> {
    await this.txHost.tx.query('INSERT INTO orders (id) VALUES ($1)', [orderId]);
    if (how === 'add') await this.mail.add('confirm', { orderId }, target);
    else await this.mail.addBulk([{ name: 'confirm', payload: { orderId } }], target);
    if (fail) throw new Error('payment declined');
  }

  async outsideTransaction(orderId: number) {
    return this.mail.add('confirm', { orderId });
  }
}

/** retry, remove and getJob inside a @Transactional() method, then a failure that rolls it back. */
@Injectable()
class MailAdmin {
  constructor(
    @InjectQueue('mail') private readonly mail: Queue<{ confirm: { orderId: number } }>,
    private readonly queues: QueueService,
  ) {}

  @Transactional()
  async retryThenFail(id: string): Promise<never> {
    if (!(await this.mail.retry(id))) throw new Error(`retry(${id}) found nothing to retry`);
    throw new Error('rolled back after retry');
  }

  @Transactional()
  async removeThenFail(id: string): Promise<never> {
    if (!(await this.mail.remove(id))) throw new Error(`remove(${id}) found nothing to remove`);
    throw new Error('rolled back after remove');
  }

  /** Enqueues, reads the uncommitted job back both ways, then rolls everything back. */
  @Transactional()
  async addReadThenFail(orderId: number, seen: { viaQueue?: Job | null; viaService?: Job | null; id?: string }): Promise<never> {
    const job = await this.mail.add('confirm', { orderId });
    seen.id = job.id;
    seen.viaQueue = await this.mail.getJob(job.id);
    seen.viaService = await this.queues.getJob(job.id);
    throw new Error('rolled back after add');
  }
}

describe('implicit transaction of @nestjs-cls/transactional', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;

  beforeAll(async () => {
    await t.pool.query('CREATE TABLE orders (id int PRIMARY KEY)');
    app = await bootApp({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: t.db.url }),
        ClsModule.forRoot({
          global: true,
          plugins: [
            new ClsPluginTransactional({
              imports: [TypeOrmModule],
              adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }),
            }),
          ],
        }),
      ],
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'mail' }],
      providers: [OrderService, MailAdmin],
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  const jobsFor = async (orderId: number) =>
    (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE payload->>'orderId' = $1`, [String(orderId)])).rows[0]
      .n;
  const orderExists = async (id: number) => (await t.pool.query('SELECT 1 FROM orders WHERE id = $1', [id])).rowCount === 1;
  const inCls = <T>(fn: () => Promise<T>) => app.get(ClsService).run(fn);

  it('a committed @Transactional() method leaves the order and its job', async () => {
    await inCls(() => app.get(OrderService).placeOrder(1, false));
    expect(await orderExists(1)).toBe(true);
    expect(await jobsFor(1)).toBe(1);
  });

  it('a rolled-back one leaves neither: the add joined the transaction', async () => {
    await expect(inCls(() => app.get(OrderService).placeOrder(2, true))).rejects.toThrow('payment declined');
    expect(await orderExists(2)).toBe(false);
    expect(await jobsFor(2)).toBe(0);
  });

  /** Runs `fn` with a transaction of its own on another connection, then commits or rolls it back. */
  async function inOwnTransaction(
    kind: 'manager' | 'client',
    end: 'COMMIT' | 'ROLLBACK',
    fn: (t: TransactionTarget) => Promise<unknown>,
  ) {
    if (kind === 'manager') {
      const runner = app.get<DataSource>(getDataSourceToken()).createQueryRunner();
      await runner.connect();
      await runner.startTransaction();
      try {
        await fn({ manager: runner.manager as EntityManager });
      } finally {
        await (end === 'COMMIT' ? runner.commitTransaction() : runner.rollbackTransaction());
        await runner.release();
      }
      return;
    }
    const client: PoolClient = await t.pool.connect();
    await client.query('BEGIN');
    try {
      await fn({ client });
    } finally {
      await client.query(end);
      client.release();
    }
  }

  it.each([
    ['add', 'manager'],
    ['addBulk', 'manager'],
    ['add', 'client'],
  ] as const)('an explicit %s({ %s }) inside @Transactional() wins: the job follows that transaction', async (how, kind) => {
    const base = { add: 10, addBulk: 20 }[how] + (kind === 'client' ? 100 : 0);
    // The CLS transaction rolls back, the explicit one commits: the job stays, the order does not.
    await inOwnTransaction(kind, 'COMMIT', (target) =>
      expect(inCls(() => app.get(OrderService).placeWithExplicit(base + 1, target, how, true))).rejects.toThrow(
        'payment declined',
      ),
    );
    expect({ order: await orderExists(base + 1), jobs: await jobsFor(base + 1) }).toEqual({ order: false, jobs: 1 });
    // The CLS transaction commits, the explicit one rolls back: the order stays, the job does not.
    await inOwnTransaction(kind, 'ROLLBACK', (target) =>
      inCls(() => app.get(OrderService).placeWithExplicit(base + 2, target, how, false)),
    );
    expect({ order: await orderExists(base + 2), jobs: await jobsFor(base + 2) }).toEqual({ order: true, jobs: 0 });
  });

  it('outside any transaction, add() uses the queue’s own pool as before', async () => {
    await inCls(() => app.get(OrderService).outsideTransaction(3));
    await app.get(OrderService).outsideTransaction(4); // no CLS context at all
    expect(await jobsFor(3)).toBe(1);
    expect(await jobsFor(4)).toBe(1);
  });

  const stateOf = async (id: string) => (await app.get(QueueService).getJob(id))?.state ?? null;

  it('retry() joins the transaction: its rollback leaves the job as it was', async () => {
    const mail = app.get(QueueService).getQueue('mail');
    const job = await mail.add('confirm', { orderId: 5 });
    expect(await mail.cancel(job.id)).toBe('cancelled');
    await expect(inCls(() => app.get(MailAdmin).retryThenFail(job.id))).rejects.toThrow('rolled back after retry');
    expect(await stateOf(job.id)).toBe('cancelled');
  });

  it('remove() joins the transaction: its rollback leaves the job in place', async () => {
    const job = await app.get(QueueService).add('mail', 'confirm', { orderId: 6 }, { delayMs: 60_000 });
    await expect(inCls(() => app.get(MailAdmin).removeThenFail(job.id))).rejects.toThrow('rolled back after remove');
    expect(await stateOf(job.id)).toBe('delayed');
  });

  it('getJob() (Queue and QueueService) reads in the transaction: it sees the job the transaction enqueued', async () => {
    const seen: { viaQueue?: Job | null; viaService?: Job | null; id?: string } = {};
    await expect(inCls(() => app.get(MailAdmin).addReadThenFail(7, seen))).rejects.toThrow('rolled back after add');
    expect(seen.viaQueue).toMatchObject({ id: seen.id, state: 'waiting', payload: { orderId: 7 } });
    expect(seen.viaService).toMatchObject({ id: seen.id, state: 'waiting', payload: { orderId: 7 } });
    expect(await stateOf(seen.id!)).toBeNull();
  });
});
