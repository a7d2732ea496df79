import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import { QueueService, type Job, type Queue } from '../../lib';
import { JSONB_ARRAY_MAX_CHARS } from '../../lib/db/insert';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// The bulk insert sends every payload of a call in one JSON array, split on the server by
// jsonb_array_elements (zipped with ROWS FROM to the columns whose values differ), and gets the
// ids back as one text; a call too long for one jsonb value sends a text[] instead. Whichever
// form, every job is stored as passed, under the id its returned Job names, in input order.

type Jobs = Record<'a' | 'b' | 'big', unknown>;

describe('bulk insert: what addBulk stores, and what it returns', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<Jobs>;

  beforeAll(async () => {
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'bulk' }] });
    await app.init();
    queue = app.get(QueueService).getQueue('bulk') as Queue<Jobs>;
  });
  afterAll(async () => {
    await app?.close();
  });

  const stored = async (ids: string[]) =>
    (
      await t.pool.query<{
        id: string;
        name: string;
        payload: unknown;
        priority: number;
        max_attempts: number;
        delayed: boolean;
      }>(
        `SELECT id::text, name, payload, priority, max_attempts, run_at > now() AS delayed
         FROM pgqueue.jobs j WHERE id = ANY($1::bigint[]) ORDER BY j.id`,
        [ids],
      )
    ).rows;

  /** Every returned Job is what getJob reads back for its id. */
  async function sameAsStored(jobs: Job[]): Promise<void> {
    for (const job of jobs) {
      const read = await queue.getJob(job.id);
      expect(read).toMatchObject({
        id: job.id,
        name: job.name,
        payload: job.payload,
        state: job.state,
        priority: job.priority,
        maxAttempts: job.maxAttempts,
        runAt: job.runAt,
        createdAt: job.createdAt,
        timeoutMs: job.timeoutMs,
        attempt: 0,
        errors: [],
      });
    }
  }

  // Text that an array literal or a JSON array must carry intact: separators, quotes,
  // backslashes, braces, escapes, non-ASCII.
  const awkward = [
    { s: 'a,b', q: '"quoted"', bs: 'back\\slash', braces: '{1,2}', nl: 'line\nbreak' },
    ['x', 1, -0.5, 1e21, true, null, { nested: [[], {}] }],
    'a string payload with , and " and \\ and ]',
    42,
    null,
    { emoji: 'żółw 🐢', cjk: '日本語', rtl: 'שלום' },
    { big: Number.MAX_SAFE_INTEGER, tiny: 5e-324 },
    [],
    {},
  ];

  it('stores awkward payloads as passed, in input order, each under the id its Job names', async () => {
    const jobs = await queue.addBulk([
      ...awkward.map((payload) => ({ name: 'a' as const, payload })),
      { name: 'a', payload: undefined },
    ]);
    expect(jobs.map((j) => Number(j.id))).toEqual([...jobs.map((j) => Number(j.id))].sort((x, y) => x - y));
    const rows = await stored(jobs.map((j) => j.id));
    expect(rows.map((r) => r.id)).toEqual(jobs.map((j) => j.id));
    // -0 is stored as 0, as JSON writes it; undefined at the root as null.
    expect(rows.map((r) => r.payload)).toEqual([...awkward.map((p) => JSON.parse(JSON.stringify(p))), null]);
    await sameAsStored(jobs);
  });

  it('zips per-job values (name, priority, delay, attempts, backoff, timeout) with their payloads', async () => {
    const entries = Array.from({ length: 30 }, (_, i) => ({
      name: (i % 2 ? 'a' : 'b') as 'a' | 'b',
      payload: { i },
      opts: {
        priority: i % 3,
        attempts: 1 + (i % 4),
        ...(i % 5 === 0 ? { delayMs: 60_000 } : {}),
        ...(i % 7 === 0 ? { backoff: { type: 'fixed' as const, delayMs: 10 } } : {}),
        ...(i % 6 === 0 ? { timeoutMs: 5_000 } : {}),
      },
    }));
    const jobs = await queue.addBulk(entries);
    const rows = await stored(jobs.map((j) => j.id));
    expect(rows).toEqual(
      entries.map((e, i) => ({
        id: jobs[i].id,
        name: e.name,
        payload: { i },
        priority: e.opts.priority,
        max_attempts: e.opts.attempts,
        delayed: i % 5 === 0,
      })),
    );
    expect(jobs.map((j) => j.state)).toEqual(entries.map((_, i) => (i % 5 === 0 ? 'delayed' : 'waiting')));
    await sameAsStored(jobs);
  });

  it(`a call of more than ${JSONB_ARRAY_MAX_CHARS} payload characters (the text[] form) stores every job too`, async () => {
    const each = 1_000_000; // characters of JSON per payload, under maxPayloadBytes (1 MiB)
    const n = Math.ceil(JSONB_ARRAY_MAX_CHARS / each) + 1;
    const entries = Array.from({ length: n }, (_, i) => ({ name: 'big' as const, payload: { i, s: 'x'.repeat(each - 20) } }));
    const jobs = await queue.addBulk(entries);
    const { rows } = await t.pool.query<{ id: string; i: number; len: number }>(
      `SELECT id::text, (payload->>'i')::int AS i, length(payload->>'s') AS len FROM pgqueue.jobs
       WHERE id = ANY($1::bigint[]) ORDER BY jobs.id`,
      [jobs.map((j) => j.id)],
    );
    expect(rows).toEqual(jobs.map((j, i) => ({ id: j.id, i, len: each - 20 })));
  });

  it('one NOTIFY per call, saying when its jobs are due: one due time (worked out from the parameters) or several (the earliest)', async () => {
    const listener = new Client({ connectionString: t.db.url });
    await listener.connect();
    const seen: string[] = [];
    listener.on('notification', (n) => {
      if (n.channel === 'pgqueue_jobs' && n.payload?.startsWith('bulk|')) seen.push(n.payload);
    });
    await listener.query('LISTEN pgqueue_jobs');
    try {
      // Each NOTIFY is delivered after its commit, which the call awaited: it may still be on its way.
      const next = async (n: number) => {
        await waitFor(() => seen.length >= n, { message: () => `NOTIFY ${n}; seen ${JSON.stringify(seen)}` });
        return seen[n - 1];
      };
      await queue.addBulk([
        { name: 'a', payload: 1 },
        { name: 'a', payload: 2 },
      ]);
      expect(await next(1)).toBe('bulk|0');
      await queue.addBulk([1, 2, 3].map((payload) => ({ name: 'a' as const, payload, opts: { delayMs: 60_000 } })));
      const due = Number((await next(2)).split('|')[1]);
      expect(due).toBeGreaterThan(59_000);
      expect(due).toBeLessThanOrEqual(60_000);
      await queue.addBulk([
        { name: 'a', payload: 1, opts: { delayMs: 120_000 } },
        { name: 'a', payload: 2, opts: { delayMs: 30_000 } },
      ]);
      const earliest = Number((await next(3)).split('|')[1]);
      expect(earliest).toBeGreaterThan(29_000);
      expect(earliest).toBeLessThanOrEqual(30_000);
      expect(seen).toHaveLength(3);
    } finally {
      await listener.end();
    }
  });

  it('an empty addBulk stores nothing and returns no job', async () => {
    await expect(queue.addBulk([])).resolves.toEqual([]);
  });
});
