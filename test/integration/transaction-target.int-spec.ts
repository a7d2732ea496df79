import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client, Pool, type PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { PgQueueConfigError, Process, Processor, QueueService, type ActiveJob, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';
import { throughPgBouncer } from '../support/pgbouncer';

// Issue 24, point 1: a manager or client passed to add() (addBulk, addFlow, cancel, retry,
// remove) or job.completeWith() that is not in a transaction ran each statement in autocommit,
// so the job committed even when the caller's work then rolled back. Refused now, at the call,
// saying what to pass; every right target still works. In a PGQUEUE_TEST_PGBOUNCER run the
// clients and the DataSource below go through PgBouncer in transaction mode, where the check
// reads the transaction status PgBouncer relays.

let completeVia: DataSource | null = null;
let completePool: Pool | null = null;
const refusals: unknown[] = [];

@Processor('txc')
class CompleteProcessor {
  /** First a wrong target (refused, and the call does not count), then the right one. */
  @Process('manager')
  async viaManager(job: ActiveJob) {
    refusals.push(await job.completeWith({ manager: completeVia!.manager }, 'wrong').catch((e: unknown) => e));
    await completeVia!.transaction((manager) => job.completeWith({ manager }, 'manager'));
  }

  @Process('client')
  async viaClient(job: ActiveJob) {
    const client = await completePool!.connect();
    try {
      refusals.push(await job.completeWith({ client }, 'wrong').catch((e: unknown) => e));
      await client.query('BEGIN');
      await job.completeWith({ client }, 'client');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }
}

describe('a manager or client must be in a transaction', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;
  let url: string;
  let dataSource: DataSource;
  let pool: Pool;

  beforeAll(async () => {
    url = process.env.PGQUEUE_TEST_PGBOUNCER_URL ? throughPgBouncer(t.db.url) : t.db.url;
    // In a PgBouncer run the test's own clients must go through it too, or the run proves nothing more.
    if (process.env.PGQUEUE_TEST_PGBOUNCER) expect(new URL(url).port).toBe(new URL(process.env.PGQUEUE_TEST_PGBOUNCER_URL!).port);
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'tx' }, { name: 'txc' }],
      providers: [CompleteProcessor],
    });
    await app.get(QueueService).getQueue('tx').pause(); // jobs here are only stored, never run
    queue = app.get(QueueService).getQueue('tx');
    dataSource = await new DataSource({ type: 'postgres', url, poolSize: 3 }).initialize();
    pool = new Pool({ connectionString: url, max: 3 });
    completeVia = dataSource;
    completePool = pool;
  });
  afterAll(async () => {
    await app?.close();
    await dataSource?.destroy();
    await pool?.end();
  });

  const stored = async (): Promise<number> =>
    (await t.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'tx'`)).rows[0].n;

  /** Runs `fn` on a pooled client (no BEGIN unless `fn` sends it), released after. */
  async function onClient<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    const c = await pool.connect();
    try {
      return await fn(c);
    } finally {
      c.release();
    }
  }

  async function refused(call: () => Promise<unknown>, message: RegExp): Promise<void> {
    const before = await stored();
    const err = await call().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect((err as Error).message).toMatch(message);
    expect(await stored()).toBe(before); // nothing committed
  }

  describe('refused', () => {
    it('the DataSource’s own manager (no transaction)', async () => {
      await refused(
        () => queue.add('x', {}, { manager: dataSource.manager }),
        /^add\(\): the manager passed is not in a transaction \(it has no query runner.*so the job would commit at once.*dataSource\.transaction\(async \(manager\) => \.\.\.\)/,
      );
    });

    it('a query runner’s manager before startTransaction(), and after its commit', async () => {
      const runner = dataSource.createQueryRunner();
      try {
        await refused(() => queue.add('x', {}, { manager: runner.manager }), /its query runner has none started/);
        await runner.startTransaction();
        await runner.commitTransaction();
        await refused(() => queue.add('x', {}, { manager: runner.manager }), /its query runner has none started/);
      } finally {
        await runner.release();
      }
    });

    it('a pg Pool, outright', async () => {
      await refused(() => queue.add('x', {}, { client: pool }), /^add\(\): the client passed is a pg Pool.*BEGIN/);
    });

    it('a pooled client and a plain Client without BEGIN, and one after COMMIT', async () => {
      await onClient(async (c) => {
        await refused(
          () => queue.add('x', {}, { client: c }),
          /^add\(\): the client passed is not in a transaction \(no BEGIN\)/,
        );
        await c.query('BEGIN');
        await c.query('COMMIT');
        await refused(() => queue.add('x', {}, { client: c }), /not in a transaction \(no BEGIN\)/);
      });
      const plain = new Client({ connectionString: url });
      await plain.connect();
      try {
        await refused(() => queue.add('x', {}, { client: plain }), /not in a transaction \(no BEGIN\)/);
      } finally {
        await plain.end();
      }
    });

    it('addBulk, addFlow, cancel, retry and remove the same way', async () => {
      const waiting = await queue.add('x', {});
      await onClient(async (c) => {
        await refused(
          () => queue.addBulk([{ name: 'x', payload: {} }], { client: c }),
          /^addBulk\(\): .*so the jobs would commit/,
        );
        await refused(
          () => app.get(QueueService).addFlow({ queue: 'tx', name: 'x', payload: {} }, { client: c }),
          /^addFlow\(\): .*so the flow's jobs would commit/,
        );
        await refused(() => queue.cancel(waiting.id, { client: c }), /^cancel\(\): .*so the cancel would commit/);
        await refused(() => queue.retry(waiting.id, { client: c }), /^retry\(\): /);
        await refused(() => queue.remove(waiting.id, { client: c }), /^remove\(\): /);
      });
      expect((await queue.getJob(waiting.id))?.state).toBe('waiting');
      // A read needs no transaction: getJob reads on the manager or client as given.
      expect((await queue.getJob(waiting.id, { manager: dataSource.manager }))?.id).toBe(waiting.id);
    });

    it('what cannot say whether it is in a transaction: a wrapper, or an EntityManager passed as client', async () => {
      await onClient(async (c) => {
        await c.query('BEGIN');
        const wrapper = { query: (text: string, values?: unknown[]) => c.query(text, values) };
        await refused(() => queue.add('x', {}, { client: wrapper }), /cannot be told: it reports no transaction status/);
        await refused(
          () => queue.add('x', {}, { client: dataSource.manager as never }),
          /is a TypeORM EntityManager; pass it as \{ manager \}/,
        );
        await c.query('ROLLBACK');
      });
    });

    it('job.completeWith() on a manager or client without a transaction, before the call counts', async () => {
      const jobs = [await app.get(QueueService).add('txc', 'manager', {}), await app.get(QueueService).add('txc', 'client', {})];
      const txc = app.get(QueueService).getQueue('txc');
      await waitFor(async () => (await Promise.all(jobs.map((j) => txc.getJob(j.id)))).every((j) => j?.state === 'completed'), {
        message: 'both jobs to complete through their second completeWith()',
      });
      expect(refusals).toHaveLength(2);
      for (const err of refusals) {
        expect(err).toBeInstanceOf(PgQueueConfigError);
        expect((err as Error).message).toMatch(/^completeWith\(\): .*so the completion would commit at once/);
      }
      expect((await Promise.all(jobs.map((j) => txc.getJob(j.id)))).map((j) => j?.result)).toEqual(['manager', 'client']);
    });
  });

  describe('accepted, and rolled back with the transaction', () => {
    it('the manager dataSource.transaction() hands you', async () => {
      const before = await stored();
      await expect(
        dataSource.transaction(async (manager) => {
          await queue.add('x', {}, { manager });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await stored()).toBe(before);
      const job = await dataSource.transaction((manager) => queue.add('x', {}, { manager }));
      expect((await queue.getJob(job.id))?.state).toBe('waiting');
    });

    it('a query runner’s manager after startTransaction()', async () => {
      const before = await stored();
      const runner = dataSource.createQueryRunner();
      try {
        await runner.startTransaction();
        await queue.add('x', {}, { manager: runner.manager });
        await runner.rollbackTransaction();
      } finally {
        await runner.release();
      }
      expect(await stored()).toBe(before);
    });

    it('a pg client after BEGIN, awaited or not', async () => {
      const before = await stored();
      await onClient(async (c) => {
        await c.query('BEGIN');
        await queue.add('x', {}, { client: c });
        await c.query('ROLLBACK');
        // A BEGIN sent without awaiting it: the status read at the call is still idle; the
        // statement queued behind the BEGIN says otherwise.
        void c.query('BEGIN');
        await queue.add('x', {}, { client: c });
        await c.query('ROLLBACK');
      });
      expect(await stored()).toBe(before);
      const kept = await onClient(async (c) => {
        await c.query('BEGIN');
        const job = await queue.add('x', {}, { client: c });
        await c.query('COMMIT');
        return job;
      });
      expect((await queue.getJob(kept.id))?.state).toBe('waiting');
    });

    it('a client of a pg without getTransactionStatus(): the status followed from its connection', async () => {
      const before = await stored();
      await onClient(async (c) => {
        // As pg before 8.2x: no getTransactionStatus(); its connection emits every ReadyForQuery.
        Object.defineProperty(c, 'getTransactionStatus', { value: undefined, configurable: true });
        try {
          await refused(() => queue.add('x', {}, { client: c }), /not in a transaction \(no BEGIN\)/);
          await c.query('BEGIN');
          await queue.add('x', {}, { client: c });
          await c.query('ROLLBACK');
          await refused(() => queue.add('x', {}, { client: c }), /not in a transaction \(no BEGIN\)/);
        } finally {
          delete (c as { getTransactionStatus?: unknown }).getTransactionStatus;
        }
      });
      expect(await stored()).toBe(before);
    });
  });
});
