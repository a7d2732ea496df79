import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueConfigError, Process, Processor, QueueService, type Job, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// uniqueKey: at most one live job per queue and key; replaceWaiting debounces.

const runs: { id: string; payload: unknown }[] = [];
let release: (() => void) | null = null;

@Processor('uq')
class UqProcessor {
  @Process()
  async run(job: Job<{ v: number; hold?: boolean }>) {
    runs.push({ id: job.id, payload: job.payload });
    if (job.payload.hold) await new Promise<void>((r) => (release = r));
  }
}

describe('unique keys', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { v: number; hold?: boolean } }>;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'uq' }],
      providers: [UqProcessor],
    });
    queue = app.get(QueueService).getQueue('uq');
  });
  afterAll(async () => {
    release?.();
    await app?.close();
  });

  const live = async (key: string) =>
    (await t.pool.query(`SELECT id::text FROM pgqueue.jobs WHERE queue = 'uq' AND unique_key = $1`, [key])).rows.map((r) => r.id);

  it('a second add while the first is waiting returns the first and inserts nothing; the key is free once it finished', async () => {
    const a = await queue.add('x', { v: 1 }, { uniqueKey: 'k1', delayMs: 500 });
    const b = await queue.add('x', { v: 2 }, { uniqueKey: 'k1' });
    expect(b.id).toBe(a.id);
    expect(b.payload).toEqual({ v: 1 });
    expect(await live('k1')).toEqual([a.id]);
    await waitFor(async () => (await queue.getJob(a.id))?.state === 'completed');
    expect(runs.filter((r) => r.id === a.id)).toHaveLength(1);
    const c = await queue.add('x', { v: 3 }, { uniqueKey: 'k1' });
    expect(c.id).not.toBe(a.id);
  });

  it('replaceWaiting replaces the waiting job’s payload and run time (debounce): one run, the last payload', async () => {
    const a = await queue.add('x', { v: 1 }, { uniqueKey: 'deb', delayMs: 60_000 });
    const b = await queue.add('x', { v: 2 }, { uniqueKey: 'deb', delayMs: 60_000, replaceWaiting: true });
    const c = await queue.add('x', { v: 3 }, { uniqueKey: 'deb', delayMs: 200, replaceWaiting: true });
    expect(new Set([a.id, b.id, c.id]).size).toBe(1);
    expect(c.payload).toEqual({ v: 3 });
    expect(c.createdAt.getTime()).toBe(a.createdAt.getTime());
    await waitFor(async () => (await queue.getJob(a.id))?.state === 'completed', { message: 'the debounced job to run' });
    expect(runs.filter((r) => r.id === a.id).map((r) => r.payload)).toEqual([{ v: 3 }]);
  });

  it('replaceWaiting leaves a running job alone and returns it', async () => {
    const a = await queue.add('x', { v: 1, hold: true }, { uniqueKey: 'busy' });
    await waitFor(() => runs.some((r) => r.id === a.id));
    const b = await queue.add('x', { v: 2 }, { uniqueKey: 'busy', replaceWaiting: true });
    expect(b.id).toBe(a.id);
    expect(b.state).toBe('active');
    expect(b.payload).toEqual({ v: 1, hold: true });
    release!();
    await waitFor(async () => (await queue.getJob(a.id))?.state === 'completed');
  });

  it('twenty concurrent adds of one key, on twenty connections, leave exactly one job', async () => {
    const pool = testPool(t.db.url, 20);
    await Promise.all(Array.from({ length: 20 }, () => pool.query('SELECT 1'))); // twenty open connections first
    const adds = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          const job = await queue.add('x', { v: i }, { uniqueKey: 'race', delayMs: 60_000, client });
          await client.query('COMMIT');
          return job.id;
        } finally {
          client.release();
        }
      }),
    );
    await pool.end();
    expect(new Set(adds).size).toBe(1);
    expect(await live('race')).toEqual([adds[0]]);
  });

  it('a keyed add in a transaction that rolls back leaves the key free', async () => {
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      await queue.add('x', { v: 1 }, { uniqueKey: 'rb', delayMs: 60_000, client });
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await live('rb')).toEqual([]);
  });

  it('addBulk mixes keyed and plain jobs, in input order; a key twice in one call is refused before anything is stored', async () => {
    const held = await queue.add('x', { v: 0 }, { uniqueKey: 'b2', delayMs: 60_000 });
    const out = await queue.addBulk([
      { name: 'x', payload: { v: 1 }, opts: { delayMs: 60_000 } },
      { name: 'x', payload: { v: 2 }, opts: { uniqueKey: 'b1', delayMs: 60_000 } },
      { name: 'x', payload: { v: 3 }, opts: { delayMs: 60_000 } },
      { name: 'x', payload: { v: 4 }, opts: { uniqueKey: 'b2', delayMs: 60_000 } },
    ]);
    expect(out.map((j) => j.payload)).toEqual([{ v: 1 }, { v: 2 }, { v: 3 }, { v: 0 }]);
    expect(out[3].id).toBe(held.id);
    expect(Number(out[0].id)).toBeLessThan(Number(out[2].id));
    expect(await live('b1')).toEqual([out[1].id]);
    const before = (await t.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n;
    await expect(
      queue.addBulk([
        { name: 'x', payload: { v: 1 }, opts: { uniqueKey: 'dup' } },
        { name: 'x', payload: { v: 2 }, opts: { uniqueKey: 'dup' } },
      ]),
    ).rejects.toThrow(/appears twice/);
    expect((await t.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n).toBe(before);
  });

  it('refuses a bad uniqueKey at enqueue, and uniqueKey as a default at boot', async () => {
    await expect(queue.add('x', { v: 1 }, { uniqueKey: '' })).rejects.toThrow(PgQueueConfigError);
    await expect(queue.add('x', { v: 1 }, { replaceWaiting: true })).rejects.toThrow(/needs a uniqueKey/);
    await expect(
      bootApp({ options: { connection: t.db.url, defaultJobOptions: { uniqueKey: 'x' } as never }, queues: [{ name: 'uq2' }] }),
    ).rejects.toThrow(/per job/);
  });
});
