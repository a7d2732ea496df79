import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  LeaseLostError,
  PgQueueConfigError,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type Queue,
  type TransactionalStepContext,
} from '../../lib';
import { bootApp } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// `{ manager }` steps (issue 31, item 2): in an app whose queue connection comes from a TypeORM
// DataSource, a transactional step runs in dataSource.transaction(...) and is recorded through its
// EntityManager, so the app's write and the step's record commit together or not at all.

type Mode = 'commit' | 'throws' | 'steal' | 'client';
let pool: Pool;
const runs = new Map<string, number>();
const seen = new Map<string, unknown>();
const ran = (id: string) => runs.set(id, (runs.get(id) ?? 0) + 1);

@Processor('orders')
class OrdersProcessor {
  @Process()
  async run(job: ActiveJob<{ mode: Mode }>) {
    const { mode } = job.payload;
    const order = await job
      .step(
        'reserve',
        async ({ manager, client }: TransactionalStepContext<EntityManager>) => {
          ran(job.id);
          await manager.query('INSERT INTO orders (job_id, attempt) VALUES ($1, $2)', [job.id, job.attempt]);
          // The client is the connection under the manager: the same transaction sees the row.
          const mine = await client.query('SELECT count(*)::int AS n FROM orders WHERE job_id = $1', [job.id]);
          if (mode === 'throws' && job.attempt === 1) throw new Error('the step fails after its write');
          if (mode === 'steal') await pool.query(`UPDATE pgqueue.jobs SET locked_by = 'another-worker' WHERE id = $1`, [job.id]);
          return { attempt: job.attempt, seenInTx: mine.rows[0].n };
        },
        { transaction: true },
      )
      .catch((err: unknown) => {
        seen.set(job.id, err);
        throw err;
      });
    if (mode === 'commit' && job.attempt === 1) throw new Error('fails after the step');
    return order;
  }
}

@Processor('plain')
class PlainProcessor {
  @Process()
  async run(job: ActiveJob) {
    await job
      .step('reserve', async ({ manager }) => manager.query('SELECT 1'), { transaction: true })
      .catch((err: unknown) => {
        seen.set(job.id, err);
        throw err;
      });
  }
}

describe('{ manager } steps', () => {
  const t = useTestDatabase();
  let dataSource: DataSource;
  let withDs: INestApplicationContext;
  let withoutDs: INestApplicationContext;
  let orders: Queue<{ x: { mode: Mode } }>;
  let plain: Queue;

  beforeAll(async () => {
    pool = testPool(t.db.url, 4);
    dataSource = new DataSource({ type: 'postgres', url: t.db.url });
    await dataSource.initialize();
    await pool.query('CREATE TABLE orders (job_id bigint NOT NULL, attempt int NOT NULL)');
    const backoff = { attempts: 3, backoff: { type: 'fixed' as const, delayMs: 50 } };
    withDs = await bootApp({
      options: { dataSource, pollIntervalMs: 100 },
      queues: [{ name: 'orders', defaultJobOptions: backoff }],
      providers: [OrdersProcessor],
    });
    withoutDs = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'plain', defaultJobOptions: { attempts: 1 } }],
      providers: [PlainProcessor],
    });
    orders = withDs.get(QueueService).getQueue('orders');
    plain = withoutDs.get(QueueService).getQueue('plain');
  });
  afterAll(async () => {
    await withDs?.close();
    await withoutDs?.close();
    await dataSource?.destroy();
    await pool?.end();
  });

  const rows = async (id: string) =>
    (await pool.query('SELECT attempt FROM orders WHERE job_id = $1 ORDER BY attempt', [id])).rows.map((r) => r.attempt);
  const finished = (q: Queue, id: string) => async () => ['completed', 'failed'].includes((await q.getJob(id))?.state ?? '');

  it('commits the manager’s write with the step’s record: a later failure of the job does not run it again', async () => {
    const job = await orders.add('x', { mode: 'commit' });
    await waitFor(finished(orders, job.id));
    const done = await orders.getJob(job.id);
    expect(done?.state).toBe('completed');
    expect(done?.attempt).toBe(2);
    expect(done?.result).toEqual({ attempt: 1, seenInTx: 1 });
    expect(runs.get(job.id)).toBe(1);
    expect(await rows(job.id)).toEqual([1]);
    expect((await orders.getJobSteps(job.id)).map((s) => [s.name, s.status, s.attempt])).toEqual([['reserve', 'done', 1]]);
  });

  it('rolls the manager’s write back with the step when the function throws; the retry commits once', async () => {
    const job = await orders.add('x', { mode: 'throws' });
    await waitFor(finished(orders, job.id));
    expect((await orders.getJob(job.id))?.state).toBe('completed');
    expect(runs.get(job.id)).toBe(2);
    expect(await rows(job.id)).toEqual([2]);
  });

  it('keeps the lease guard: a worker whose lease is gone records nothing and its write rolls back', async () => {
    const job = await orders.add('x', { mode: 'steal' }, { attempts: 1 });
    await waitFor(() => seen.has(job.id));
    expect(seen.get(job.id)).toBeInstanceOf(LeaseLostError);
    expect(await rows(job.id)).toEqual([]);
    expect(await orders.getJobSteps(job.id)).toEqual([]);
  });

  it('refuses a manager where the queue has no DataSource, saying what to configure', async () => {
    const job = await plain.add('x', {});
    await waitFor(finished(plain, job.id));
    const err = seen.get(job.id) as Error;
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toMatch(/has no DataSource/);
    expect(err.message).toMatch(/forRoot\(\{ dataSource \}\)/);
    expect((await plain.getJob(job.id))?.state).toBe('failed');
  });
});
