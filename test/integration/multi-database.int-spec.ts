import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import { ClsModule, ClsService } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { InjectQueue, PgQueueModule, Process, Processor, QueueService, type ActiveJob, type Job, type Queue } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { createTestDatabase, testPool, useTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { pooledOptions } from '../support/pgbouncer';
import { startSecondServer, type SecondServer } from '../support/second-server';

// Queues on two PostgreSQL servers: the test server (the app's database) and a throwaway
// embedded one (test/fixtures/second-server.mjs) holding the "bulk" queue. Each connection has
// its own pool, listener, migrations and maintenance; a transaction of one database cannot
// enqueue into a queue of the other.

const ran: { queue: string; id: string }[] = [];

@Processor('app')
class AppProcessor {
  @Process()
  run(job: Job) {
    ran.push({ queue: 'app', id: job.id });
  }
}

/** While set, bulk handlers wait for it: jobs held running across a server restart. */
let gate: Promise<void> | null = null;
let bulkStarted = 0;

@Processor('bulk')
class BulkProcessor {
  @Process()
  async run(job: Job) {
    bulkStarted++;
    if (gate) await gate;
    await new Promise((r) => setTimeout(r, 5));
    ran.push({ queue: 'bulk', id: job.id });
  }
}

/** Which of `jobs` are completed in `pool`'s database, sorted. */
/** The pool whose transaction the settle handler completes its job in, and what that threw. */
let settleIn: Pool | null = null;
const settleErrors: string[] = [];

@Processor('settle')
class SettleProcessor {
  @Process()
  async run(job: ActiveJob) {
    const client = await settleIn!.connect();
    try {
      await client.query('BEGIN');
      await job.completeWith({ client });
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      settleErrors.push((err as Error).message);
    } finally {
      client.release();
    }
  }
}

let limitedRunning = 0;
let limitedMax = 0;

@Processor('limited')
class LimitedProcessor {
  @Process()
  async run() {
    limitedRunning++;
    limitedMax = Math.max(limitedMax, limitedRunning);
    await new Promise((r) => setTimeout(r, 30));
    limitedRunning--;
  }
}

@Processor('fragile')
class FragileProcessor {
  @Process()
  run() {
    throw new Error('broken for good');
  }
}

/** Enqueues inside a @Transactional() method of the app's DataSource (the CLS path, no manager argument). */
@Injectable()
class InAppTransaction {
  constructor(
    @InjectQueue('app') private readonly appQueue: Queue,
    @InjectQueue('bulk') private readonly bulkQueue: Queue,
  ) {}

  @Transactional()
  add(queue: 'app' | 'bulk'): Promise<Job> {
    return (queue === 'app' ? this.appQueue : this.bulkQueue).add('x', { cls: true });
  }
}

const completed = async (pool: Pool, jobs: readonly { id: string }[]): Promise<string[]> =>
  (
    await pool.query<{ id: string }>(
      `SELECT id::text AS id FROM pgqueue.job_history WHERE state = 'completed' AND id = ANY($1::bigint[])`,
      [jobs.map((j) => j.id)],
    )
  ).rows
    .map((r) => r.id)
    .sort();
const ids = (jobs: readonly { id: string }[]): string[] => jobs.map((j) => j.id).sort();

const count = async (pool: Pool, sql: string, params: unknown[] = []): Promise<number> =>
  (await pool.query<{ n: number }>(sql, params)).rows[0].n;

describe('queues on two PostgreSQL servers', () => {
  const t = useTestDatabase();
  let second: SecondServer;
  let secondPool: Pool;

  beforeAll(async () => {
    second = await startSecondServer();
    secondPool = testPool(second.url, 2);
  }, 120_000);
  afterAll(async () => {
    await secondPool?.end();
    await second?.stop();
  }, 60_000);
  beforeEach(() => {
    ran.length = 0;
  });

  const twoServers = (extra: Record<string, unknown> = {}) =>
    bootApp({
      options: { connection: t.db.url, pollIntervalMs: 200, connections: { bulk: { connection: second.url } }, ...extra },
      queues: [{ name: 'app' }, { name: 'bulk', connection: 'bulk', concurrency: 4 }],
      providers: [AppProcessor, BulkProcessor],
    });

  it('runs the queues of both at once, each job in its own database, migrated on each', async () => {
    const app = await twoServers();
    try {
      const runtime = runtimeOf(app);
      expect(runtime.connections.map((c) => c.name)).toEqual(['default', 'bulk']);
      expect(runtime.connectionOf('bulk').identity).not.toBe(runtime.connectionOf('app').identity);
      const queues = app.get(QueueService);
      const jobs = (n: number) => Array.from({ length: n }, (_, i) => ({ name: 'x', payload: { i } }));
      const [a, b] = await Promise.all([queues.addBulk('app', jobs(40)), queues.addBulk('bulk', jobs(40))]);
      await waitFor(async () => (await completed(t.pool, a)).length === 40 && (await completed(secondPool, b)).length === 40, {
        timeoutMs: 30_000,
        message: async () => `40 jobs of each queue to complete; ran ${ran.length}`,
      });
      expect(await completed(t.pool, a)).toEqual(ids(a));
      expect(await completed(secondPool, b)).toEqual(ids(b));
      // Nothing of one queue in the other's database.
      expect(await count(t.pool, `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'bulk'`)).toBe(0);
      expect(await count(secondPool, `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'app'`)).toBe(0);
      // Each database has this node in its own registry (its own maintenance), and its schema migrated.
      expect(await count(secondPool, 'SELECT count(*)::int AS n FROM pgqueue.nodes')).toBeGreaterThanOrEqual(1);
      const counts = await queues.getCounts();
      expect(Object.keys(counts).sort()).toEqual(['app', 'bulk']);
      expect(counts.bulk.waiting + counts.app.waiting).toBe(0);
      // A job id is per database: getQueue(name).getJob(id) reads the queue's own.
      expect((await queues.getQueue('bulk').getJob(b[0].id))?.queue).toBe('bulk');
      expect((await queues.getQueue('app').getJob(a[0].id))?.queue).toBe('app');
    } finally {
      await app.close();
    }
  }, 60_000);

  it('a restart of one server: the queues of the other keep running, and every job of the stopped one runs after it is back', async () => {
    let openGate!: () => void;
    gate = new Promise<void>((r) => (openGate = r));
    bulkStarted = 0;
    const app = await twoServers({ leaseMs: 2000, rescueIntervalMs: 300 });
    let down = false;
    try {
      const queues = app.get(QueueService);
      const bulk = await queues.addBulk(
        'bulk',
        Array.from({ length: 60 }, (_, i) => ({ name: 'x', payload: { i } })),
      );
      await waitFor(() => bulkStarted >= 4, { timeoutMs: 20_000, message: 'four bulk jobs to be running' });
      // Four jobs run (held by the gate), the others wait in the bulk database.
      expect((await completed(secondPool, bulk)).length).toBe(0);
      await second.down();
      down = true;
      // The held jobs end while their database is down: their outcomes cannot be written.
      openGate();
      // The bulk server is down (held down until up()): the app's queue keeps flowing.
      const appJobs = await queues.addBulk(
        'app',
        Array.from({ length: 20 }, (_, i) => ({ name: 'y', payload: { i } })),
      );
      await waitFor(async () => (await completed(t.pool, appJobs)).length === 20, {
        timeoutMs: 20_000,
        message: 'the app queue to drain while the bulk server is down',
      });
      expect(await completed(t.pool, appJobs)).toEqual(ids(appJobs));
      await expect(secondPool.query('SELECT 1')).rejects.toThrow();
      await second.up();
      down = false;
      // Every bulk job completes once its server is back: none is lost (a job whose outcome the
      // outage swallowed runs again after its lease: at-least-once).
      await waitFor(async () => (await completed(secondPool, bulk)).length === 60, {
        timeoutMs: 60_000,
        message: async () => `all 60 bulk jobs completed; ${(await completed(secondPool, bulk).catch(() => [])).length} so far`,
      });
      expect(await completed(secondPool, bulk)).toEqual(ids(bulk));
      expect(await count(secondPool, `SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'bulk'`)).toBe(0);
    } finally {
      openGate();
      gate = null;
      if (down) await second.up();
      await app.close();
    }
  }, 120_000);

  it("completeWith() in a transaction of the other database is refused; in the job's own database it commits there", async () => {
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 200, connections: { bulk: { connection: second.url } } },
      queues: [{ name: 'settle', connection: 'bulk' }],
      providers: [SettleProcessor],
    });
    try {
      settleErrors.length = 0;
      settleIn = t.pool;
      const wrong = await app.get(QueueService).add('settle', 'x', {});
      await waitFor(async () => (await completed(secondPool, [wrong])).length === 1, {
        timeoutMs: 20_000,
        message: 'the job to complete (by its handler returning, after the refusal)',
      });
      expect(settleErrors).toEqual([
        expect.stringMatching(/completeWith\(\): the job is on connection "bulk".*connection "default"'s database/),
      ]);
      settleIn = secondPool;
      const right = await app.get(QueueService).add('settle', 'x', {});
      await waitFor(async () => (await completed(secondPool, [right])).length === 1, {
        timeoutMs: 20_000,
        message: 'the job to complete in its own transaction',
      });
      expect(settleErrors).toHaveLength(1);
    } finally {
      settleIn = null;
      await app.close();
    }
  }, 60_000);

  describe('a transaction of one database cannot enqueue into a queue of the other', () => {
    let app: INestApplicationContext;
    let appData: DataSource;
    beforeAll(async () => {
      app = await bootApp({
        options: { connection: t.db.url, workers: false, connections: { bulk: { connection: second.url } } },
        queues: [{ name: 'app' }, { name: 'bulk', connection: 'bulk' }],
      });
      appData = await new DataSource({ type: 'postgres', url: t.db.url }).initialize();
    });
    afterAll(async () => {
      await appData?.destroy();
      await app?.close();
    });

    it('refuses a pg client of the app database for the bulk queue, and leaves its transaction usable', async () => {
      const client = await t.pool.connect();
      try {
        await client.query('BEGIN');
        await expect(app.get(QueueService).add('bulk', 'x', {}, { client })).rejects.toThrow(
          /Queue "bulk" is on connection "bulk".*on connection "default"'s database/,
        );
        // The refusal came before any write: the caller's transaction is not aborted.
        const job = await app.get(QueueService).add('app', 'x', { ok: 1 }, { client });
        await client.query('COMMIT');
        expect(await count(t.pool, 'SELECT count(*)::int AS n FROM pgqueue.jobs WHERE id = $1', [job.id])).toBe(1);
      } finally {
        client.release();
      }
      expect(await count(secondPool, `SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'bulk'`)).toBe(0);
    });

    it('refuses a client of the bulk database for the app queue (addBulk too), accepts it for bulk', async () => {
      const client = await secondPool.connect();
      try {
        await client.query('BEGIN');
        await expect(app.get(QueueService).add('app', 'x', {}, { client })).rejects.toThrow(
          /Queue "app" is on connection "default"/,
        );
        await expect(app.get(QueueService).addBulk('app', [{ name: 'x', payload: {} }], { client })).rejects.toThrow(
          /Queue "app" is on connection "default"/,
        );
        const job = await app.get(QueueService).add('bulk', 'x', { ok: 2 }, { client });
        // getJob in that transaction reads its database (the job is not committed yet).
        expect((await app.get(QueueService).getJob(job.id, { client }))?.payload).toEqual({ ok: 2 });
        await client.query('COMMIT');
        expect(await count(secondPool, 'SELECT count(*)::int AS n FROM pgqueue.jobs WHERE id = $1', [job.id])).toBe(1);
      } finally {
        client.release();
      }
    });

    it('inside @Transactional() (@nestjs-cls/transactional on the app database): refuses the bulk queue, accepts the app queue', async () => {
      const cls = await bootApp({
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
        options: { connection: t.db.url, workers: false, connections: { bulk: { connection: second.url } } },
        queues: [{ name: 'app' }, { name: 'bulk', connection: 'bulk' }],
        providers: [InAppTransaction],
      });
      try {
        const inCls = <T>(fn: () => Promise<T>) => cls.get(ClsService).run(fn);
        await expect(inCls(() => cls.get(InAppTransaction).add('bulk'))).rejects.toThrow(
          /Queue "bulk" is on connection "bulk".*@Transactional\(\) transaction\) is on connection "default"'s database/,
        );
        const job = await inCls(() => cls.get(InAppTransaction).add('app'));
        expect(await count(t.pool, 'SELECT count(*)::int AS n FROM pgqueue.jobs WHERE id = $1', [job.id])).toBe(1);
        expect(await count(secondPool, `SELECT count(*)::int AS n FROM pgqueue.jobs WHERE payload->>'cls' = 'true'`)).toBe(0);
      } finally {
        await cls.close();
      }
    });

    it('refuses a TypeORM manager of the app database for the bulk queue, accepts it for the app queue', async () => {
      await expect(appData.transaction((manager) => app.get(QueueService).add('bulk', 'x', {}, { manager }))).rejects.toThrow(
        /Queue "bulk" is on connection "bulk"/,
      );
      const job = await appData.transaction((manager) => app.get(QueueService).add('app', 'x', { ok: 3 }, { manager }));
      expect(await count(t.pool, 'SELECT count(*)::int AS n FROM pgqueue.jobs WHERE id = $1', [job.id])).toBe(1);
    });
  });
});

describe('queues on two databases of one server', () => {
  const t = useTestDatabase();
  let other: TestDatabase;
  let otherPool: Pool;
  beforeAll(async () => {
    other = await createTestDatabase();
    otherPool = testPool(other.url, 2);
  });
  afterAll(async () => {
    await otherPool?.end();
    await other?.drop();
  });

  it('runs both, and refuses a client of one database for a queue of the other (same server, other name)', async () => {
    ran.length = 0;
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 200, connections: { bulk: { connection: other.url } } },
      queues: [{ name: 'app' }, { name: 'bulk', connection: 'bulk' }],
      providers: [AppProcessor, BulkProcessor],
    });
    try {
      const queues = app.get(QueueService);
      const a = [await queues.add('app', 'x', {})];
      const b = [await queues.add('bulk', 'x', {})];
      await waitFor(async () => (await completed(t.pool, a)).length === 1 && (await completed(otherPool, b)).length === 1, {
        timeoutMs: 20_000,
        message: 'one job of each queue to complete in its own database',
      });
      const client = await t.pool.connect();
      try {
        await client.query('BEGIN');
        await expect(queues.add('bulk', 'x', {}, { client })).rejects.toThrow(/Queue "bulk" is on connection "bulk"/);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
    } finally {
      await app.close();
    }
  }, 60_000);

  it('accepts a transaction of the database for a queue on another schema of it; refuses the same schema twice at boot', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, workers: false, connections: { side: { connection: t.db.url, schema: 'pgqueue_side' } } },
      queues: [{ name: 'app' }, { name: 'side', connection: 'side' }],
    });
    try {
      const client = await t.pool.connect();
      try {
        await client.query('BEGIN');
        const job = await app.get(QueueService).add('side', 'x', {}, { client });
        await client.query('COMMIT');
        expect(await count(t.pool, 'SELECT count(*)::int AS n FROM pgqueue_side.jobs WHERE id = $1', [job.id])).toBe(1);
      } finally {
        client.release();
      }
    } finally {
      await app.close();
    }
    await expect(
      bootApp({ options: { connection: t.db.url, workers: false, connections: { again: { connection: t.db.url } } } }),
    ).rejects.toThrow(/Connections "default" and "again" are the same database with the same schema "pgqueue"/);
  }, 60_000);

  it('forRootAsync with a TypeORM DataSource for the named connection; a global limit and a dead-letter queue there hold in its database', async () => {
    const bulkData = await new DataSource({ type: 'postgres', url: other.url }).initialize();
    limitedMax = 0;
    @Module({
      imports: [
        PgQueueModule.forRootAsync({
          useFactory: () =>
            pooledOptions({ connection: t.db.url, pollIntervalMs: 100, connections: { bulk: { dataSource: bulkData } } }),
        }),
        PgQueueModule.registerQueue(
          { name: 'limited', connection: 'bulk', concurrency: 5, globalConcurrency: 1 },
          { name: 'fragile', connection: 'bulk', deadLetterQueue: 'parked', defaultJobOptions: { attempts: 1 } },
          { name: 'parked', connection: 'bulk' },
        ),
      ],
      providers: [LimitedProcessor, FragileProcessor],
    })
    class AsyncModule {}
    const app = await NestFactory.createApplicationContext(AsyncModule, { logger: false, abortOnError: false });
    try {
      const queues = app.get(QueueService);
      const limited = await queues.addBulk(
        'limited',
        Array.from({ length: 8 }, (_, i) => ({ name: 'x', payload: { i } })),
      );
      const fragile = await queues.add('fragile', 'y', { n: 1 });
      await waitFor(async () => (await completed(otherPool, limited)).length === 8, {
        timeoutMs: 20_000,
        message: 'the 8 limited jobs to complete in the bulk database',
      });
      expect(limitedMax).toBe(1);
      await waitFor(
        async () =>
          (await count(otherPool, `SELECT count(*)::int AS n FROM pgqueue.jobs WHERE id = $1 AND queue = 'parked'`, [
            fragile.id,
          ])) === 1,
        { timeoutMs: 20_000, message: 'the failed job to wait in its dead-letter queue, in the bulk database' },
      );
      expect(
        await count(t.pool, `SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue IN ('parked', 'fragile', 'limited')`),
      ).toBe(0);
    } finally {
      await app.close();
      await bulkData.destroy();
    }
  }, 60_000);

  it('fails the boot on a queue of an undeclared connection, and on a dead-letter queue on another connection', async () => {
    await expect(
      bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'bulk', connection: 'bulk' }] }),
    ).rejects.toThrow(/registerQueue\(\{ name: 'bulk', connection: 'bulk' \}\): no connection "bulk" is declared.*"default"/);
    await expect(
      bootApp({
        options: { connection: t.db.url, workers: false, connections: { bulk: { connection: other.url } } },
        queues: [{ name: 'bulk', connection: 'bulk', deadLetterQueue: 'dead' }, { name: 'dead' }],
      }),
    ).rejects.toThrow(/Queue "bulk" \(connection "bulk"\) names deadLetterQueue "dead", which is on connection "default"/);
  }, 60_000);
});
