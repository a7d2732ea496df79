import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import { ClsModule, ClsService } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectQueue, type Queue, type TransactionTarget } from '../../lib';
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
      providers: [OrderService],
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  const jobsFor = async (orderId: number) =>
    (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE payload->>'orderId' = $1`, [String(orderId)])).rows[0].n;
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
  async function inOwnTransaction(kind: 'manager' | 'client', end: 'COMMIT' | 'ROLLBACK', fn: (t: TransactionTarget) => Promise<unknown>) {
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
      expect(inCls(() => app.get(OrderService).placeWithExplicit(base + 1, target, how, true))).rejects.toThrow('payment declined'),
    );
    expect({ order: await orderExists(base + 1), jobs: await jobsFor(base + 1) }).toEqual({ order: false, jobs: 1 });
    // The CLS transaction commits, the explicit one rolls back: the order stays, the job does not.
    await inOwnTransaction(kind, 'ROLLBACK', (target) => inCls(() => app.get(OrderService).placeWithExplicit(base + 2, target, how, false)));
    expect({ order: await orderExists(base + 2), jobs: await jobsFor(base + 2) }).toEqual({ order: true, jobs: 0 });
  });

  it('outside any transaction, add() uses the queue’s own pool as before', async () => {
    await inCls(() => app.get(OrderService).outsideTransaction(3));
    await app.get(OrderService).outsideTransaction(4); // no CLS context at all
    expect(await jobsFor(3)).toBe(1);
    expect(await jobsFor(4)).toBe(1);
  });
});
