import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { PgQueueConfigError, Process, Processor, QueueService, type Job, type Queue } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// deduplication: { key, ttlMs } (issue 27 point 6, BullMQ's throttle mode): an add with a key
// held by a job added less than ttlMs ago returns that job, finished or not; race-safe; the
// claim rolls back with the caller's transaction; expired keys are pruned by maintenance.

const runs: string[] = [];

@Processor('dd')
class DdProcessor {
  @Process()
  run(job: Job<{ v: number }>) {
    runs.push(job.id);
  }
}

describe('deduplication with a window', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { v: number } }>;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'dd' }],
      providers: [DdProcessor],
    });
    queue = app.get(QueueService).getQueue('dd');
  });
  afterAll(() => app?.close());

  const jobsOf = async (queueName = 'dd') =>
    (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = $1`, [queueName])).rows[0].n +
    (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1`, [queueName])).rows[0].n;

  it('a second add within the window returns the first job, even after it completed, and inserts nothing', async () => {
    const a = await queue.add('x', { v: 1 }, { deduplication: { key: 'k1', ttlMs: 3_600_000 } });
    const b = await queue.add('x', { v: 2 }, { deduplication: { key: 'k1', ttlMs: 3_600_000 } });
    expect(b.id).toBe(a.id);
    expect(b.payload).toEqual({ v: 1 });
    await waitFor(async () => (await queue.getJob(a.id))?.state === 'completed', {
      message: 'the first job to complete',
      timeoutMs: 20_000,
    });
    const before = await jobsOf();
    const c = await queue.add('x', { v: 3 }, { deduplication: { key: 'k1', ttlMs: 3_600_000 } });
    expect([c.id, c.state, c.payload]).toEqual([a.id, 'completed', { v: 1 }]);
    expect(await jobsOf()).toBe(before);
    expect(runs.filter((id) => id === a.id)).toHaveLength(1);
    expect(await queue.getDeduplicationJobId('k1')).toBe(a.id);
  });

  it('once the window is over, the next add inserts a new job', async () => {
    const a = await queue.add('x', { v: 1 }, { deduplication: { key: 'short', ttlMs: 200 }, delayMs: 60_000 });
    await waitFor(async () => (await queue.getDeduplicationJobId('short')) === null, {
      message: 'the window to end',
      timeoutMs: 20_000,
    });
    const b = await queue.add('x', { v: 2 }, { deduplication: { key: 'short', ttlMs: 60_000 }, delayMs: 60_000 });
    expect(b.id).not.toBe(a.id);
    expect(await queue.getDeduplicationJobId('short')).toBe(b.id);
  });

  it('twenty concurrent adds of one key, on twenty connections in their own transactions, leave exactly one job', async () => {
    const pool = testPool(t.db.url, 20);
    await Promise.all(Array.from({ length: 20 }, () => pool.query('SELECT 1')));
    const adds = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          const job = await queue.add('x', { v: i }, { deduplication: { key: 'race', ttlMs: 60_000 }, delayMs: 60_000, client });
          await client.query('COMMIT');
          return job.id;
        } finally {
          client.release();
        }
      }),
    );
    // And twenty more on the queue's own pool at once.
    const pooled = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        queue.add('x', { v: i }, { deduplication: { key: 'race', ttlMs: 60_000 }, delayMs: 60_000 }),
      ),
    );
    await pool.end();
    expect(new Set([...adds, ...pooled.map((j) => j.id)]).size).toBe(1);
    const live = await t.pool.query(`SELECT id::text FROM pgqueue.jobs WHERE queue = 'dd' AND payload ? 'v' AND id = $1`, [
      adds[0],
    ]);
    expect(live.rows).toHaveLength(1);
    const rows = await t.pool.query(`SELECT job_id::text FROM pgqueue.job_dedup WHERE queue = 'dd' AND key = 'race'`);
    expect(rows.rows).toEqual([{ job_id: adds[0] }]);
  });

  it('the claim rolls back with the caller’s transaction: the key is free and no job exists', async () => {
    const client = await t.pool.connect();
    let id: string;
    try {
      await client.query('BEGIN');
      id = (await queue.add('x', { v: 1 }, { deduplication: { key: 'rb', ttlMs: 60_000 }, delayMs: 60_000, client })).id;
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await queue.getJob(id)).toBeNull();
    expect(await queue.getDeduplicationJobId('rb')).toBeNull();
    const again = await queue.add('x', { v: 2 }, { deduplication: { key: 'rb', ttlMs: 60_000 }, delayMs: 60_000 });
    expect(again.id).not.toBe(id);
  });

  it('with a TypeORM manager too: a rollback frees the key, a commit holds it', async () => {
    const ds = new DataSource({ type: 'postgres', url: t.db.url });
    await ds.initialize();
    try {
      let rolledBack = '';
      await ds
        .transaction(async (manager) => {
          rolledBack = (
            await queue.add('x', { v: 1 }, { deduplication: { key: 'orm', ttlMs: 60_000 }, delayMs: 60_000, manager })
          ).id;
          throw new Error('roll back');
        })
        .catch((e: Error) => expect(e.message).toBe('roll back'));
      expect(await queue.getDeduplicationJobId('orm')).toBeNull();
      expect(await queue.getJob(rolledBack)).toBeNull();
      const kept = await ds.transaction((manager) =>
        queue.add('x', { v: 2 }, { deduplication: { key: 'orm', ttlMs: 60_000 }, delayMs: 60_000, manager }),
      );
      expect(await queue.getDeduplicationJobId('orm')).toBe(kept.id);
      const again = await ds.transaction((manager) =>
        queue.add('x', { v: 3 }, { deduplication: { key: 'orm', ttlMs: 60_000 }, delayMs: 60_000, manager }),
      );
      expect([again.id, again.payload]).toEqual([kept.id, { v: 2 }]);
    } finally {
      await ds.destroy();
    }
  });

  it('addBulk: keyed and plain jobs in one statement, in input order; a held key returns its job; a key twice is refused', async () => {
    const held = await queue.add('x', { v: 0 }, { deduplication: { key: 'b1', ttlMs: 60_000 }, delayMs: 60_000 });
    const out = await queue.addBulk([
      { name: 'x', payload: { v: 1 }, opts: { delayMs: 60_000 } },
      { name: 'x', payload: { v: 2 }, opts: { deduplication: { key: 'b1', ttlMs: 60_000 }, delayMs: 60_000 } },
      { name: 'x', payload: { v: 3 }, opts: { deduplication: { key: 'b2', ttlMs: 60_000 }, delayMs: 60_000 } },
    ]);
    expect(out[1].id).toBe(held.id);
    expect(out[0].payload).toEqual({ v: 1 });
    expect(out[2].payload).toEqual({ v: 3 });
    expect(new Set(out.map((j) => j.id)).size).toBe(3);
    for (const j of [out[0], out[2]]) expect((await queue.getJob(j.id))?.payload).toEqual(j.payload);
    expect(await queue.getDeduplicationJobId('b2')).toBe(out[2].id);
    const before = await jobsOf();
    await expect(
      queue.addBulk([
        { name: 'x', payload: { v: 1 }, opts: { deduplication: { key: 'twice', ttlMs: 1000 } } },
        { name: 'x', payload: { v: 2 }, opts: { deduplication: { key: 'twice', ttlMs: 1000 } } },
      ]),
    ).rejects.toThrow(/appears twice/);
    await expect(
      queue.addBulk([
        { name: 'x', payload: { v: 1 }, opts: { deduplication: { key: 'mix', ttlMs: 1000 } } },
        { name: 'x', payload: { v: 2 }, opts: { uniqueKey: 'mix' } },
      ]),
    ).rejects.toThrow(/split the call/);
    expect(await jobsOf()).toBe(before);
  });

  it('removeDeduplicationKey frees the key; a removed holder frees it too', async () => {
    const a = await queue.add('x', { v: 1 }, { deduplication: { key: 'rm', ttlMs: 60_000 }, delayMs: 60_000 });
    expect(await queue.removeDeduplicationKey('rm')).toBe(true);
    expect(await queue.removeDeduplicationKey('rm')).toBe(false);
    const b = await queue.add('x', { v: 2 }, { deduplication: { key: 'rm', ttlMs: 60_000 }, delayMs: 60_000 });
    expect(b.id).not.toBe(a.id);
    expect(await queue.remove(b.id)).toBe(true);
    const c = await queue.add('x', { v: 3 }, { deduplication: { key: 'rm', ttlMs: 60_000 }, delayMs: 60_000 });
    expect(c.id).not.toBe(b.id);
    expect(await queue.getJob(c.id)).toMatchObject({ payload: { v: 3 } });
  });

  it('QueueService mirrors the two key calls; obliterate takes the queue’s keys with its jobs', async () => {
    const queues = app.get(QueueService);
    const a = await queue.add('x', { v: 1 }, { deduplication: { key: 'svc', ttlMs: 60_000 }, delayMs: 60_000 });
    expect(await queues.getDeduplicationJobId('dd', 'svc')).toBe(a.id);
    expect(await queues.removeDeduplicationKey('dd', 'svc')).toBe(true);
    expect(await queues.getDeduplicationJobId('dd', 'svc')).toBeNull();
    await queue.add('x', { v: 1 }, { deduplication: { key: 'gone', ttlMs: 60_000 }, delayMs: 60_000 });
    await queue.obliterate({ force: true });
    const left = await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.job_dedup WHERE queue = 'dd'`);
    expect(left.rows[0].n).toBe(0);
  });

  it('maintenance prunes expired keys, and leaves the open ones', async () => {
    await queue.add('x', { v: 1 }, { deduplication: { key: 'old', ttlMs: 1 }, delayMs: 60_000 });
    await queue.add('x', { v: 1 }, { deduplication: { key: 'open', ttlMs: 3_600_000 }, delayMs: 60_000 });
    await waitFor(async () => (await queue.getDeduplicationJobId('old')) === null);
    const keys = async () =>
      (await t.pool.query(`SELECT key FROM pgqueue.job_dedup WHERE key IN ('old', 'open') ORDER BY key`)).rows.map((r) => r.key);
    expect(await keys()).toEqual(['old', 'open']);
    await waitFor(async () => (await runtimeOf(app).store.maintain(1000)) !== null, {
      message: 'a maintenance pass',
      timeoutMs: 20_000,
    });
    expect(await keys()).toEqual(['open']);
  });

  it('refuses bad input and combinations at add time, storing nothing', async () => {
    const before = await jobsOf();
    const bad: [unknown, RegExp][] = [
      [{ key: 'k', ttlMs: 1000, uniqueKey: 'u' }, /Unknown option/],
      [{ key: '', ttlMs: 1000 }, /deduplication.key/],
      [{ key: 'k', ttlMs: 0 }, /ttlMs must be/],
      [{ key: 'k', ttlMs: 1.5 }, /ttlMs must be/],
      [{ key: 'k' }, /ttlMs must be/],
      [{ id: 'k', ttl: 1000 }, /BullMQ calls it id/],
      ['k', /must be \{ key, ttlMs \}/],
    ];
    for (const [d, msg] of bad) {
      await expect(queue.add('x', { v: 1 }, { deduplication: d as never })).rejects.toThrow(msg);
      await expect(queue.add('x', { v: 1 }, { deduplication: d as never })).rejects.toBeInstanceOf(PgQueueConfigError);
    }
    await expect(queue.add('x', { v: 1 }, { deduplication: { key: 'k', ttlMs: 1000 }, uniqueKey: 'k' })).rejects.toThrow(
      /cannot be combined with uniqueKey/,
    );
    await expect(
      queue.add('x', { v: 1 }, { deduplication: { key: 'k', ttlMs: 1000 }, uniqueKey: 'k', replaceWaiting: true }),
    ).rejects.toThrow(/cannot be combined with uniqueKey/);
    await expect(queue.add('x', { v: 1 }, { deduplication: { key: 'k', ttlMs: 1000 }, dependsOn: [] })).rejects.toThrow(
      /cannot be combined with dependsOn/,
    );
    await expect(queue.getDeduplicationJobId('')).rejects.toBeInstanceOf(PgQueueConfigError);
    expect(await jobsOf()).toBe(before);
  });
});
