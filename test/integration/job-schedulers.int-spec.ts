import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueConfigError, QueueService, type Queue } from '../../lib';
import { cronTicks } from '../../lib/core/cron-schedule';
import { getQueueToken } from '../../lib/core/tokens';
import { JobStore } from '../../lib/db/job-store';
import { bootApp, runtimeOf } from '../support/app';
import { testPool, useTestDatabase } from '../support/database';

// Job schedulers managed at runtime (issue 28, point 3): every input checked at the call, the
// calls on a real database (and in the caller's transaction), the tick's catch-up, limit and
// endDate, daylight-saving days in Europe/Berlin, and thousands of schedulers found by one
// statement. The ticks here are driven by tickSchedulers(now) on a producer-only app (no ticker
// runs): the times are chosen, not waited for.

describe('job schedulers', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'reports' }] });
    queue = app.get<Queue>(getQueueToken('reports'));
  });
  afterAll(() => app?.close());
  beforeEach(async () => {
    await t.pool.query('DELETE FROM pgqueue.job_schedulers; DELETE FROM pgqueue.jobs');
  });

  const tick = (now: string | Date) => runtimeOf(app).supervisor.tickSchedulers(new Date(now));
  const runAts = async (name = 'report') =>
    (await t.pool.query<{ r: Date }>(`SELECT run_at AS r FROM pgqueue.jobs WHERE name = $1 ORDER BY run_at`, [name])).rows.map(
      (r) => r.r.toISOString(),
    );
  const setNext = (id: string, at: string) =>
    t.pool.query(`UPDATE pgqueue.job_schedulers SET next_run_at = $2 WHERE id = $1`, [id, at]);

  it.each([
    ['a bad cron', { pattern: '61 * * * *' }, /cron "61 \* \* \* \*" .*is not valid.*five fields/],
    ['an unknown time zone', { pattern: '0 3 * * *', tz: 'Europe/Berlni' }, /time zone "Europe\/Berlni"/],
    ['both pattern and every', { pattern: '0 3 * * *', every: 60_000 }, /exactly one of pattern .* and every/],
    ['neither pattern nor every', {}, /exactly one of pattern .* and every/],
    ['every under a second', { every: 500 }, /every must be a whole number of milliseconds, at least 1000, got 500/],
    ['a bad startDate', { every: 60_000, startDate: 'tomorrow' }, /startDate must be a Date, an ISO 8601 string/],
    [
      'endDate before startDate',
      { every: 60_000, startDate: '2030-01-02', endDate: '2030-01-01' },
      /endDate .* is before startDate/,
    ],
    ['an endDate already past', { every: 60_000, endDate: '2001-01-01' }, /endDate .* is before the first tick/],
    ['a zero limit', { every: 60_000, limit: 0 }, /limit must be a whole number of jobs, at least 1/],
    ["BullMQ's older key name", { cron: '0 3 * * *' }, /unknown repeat option "cron" \(use pattern\)/],
    ['tz with every', { every: 60_000, tz: 'Europe/Berlin' }, /tz applies to pattern only/],
  ])('refuses %s at the call, saying what to write, and stores nothing', async (_, repeat, message) => {
    const err = await queue.upsertJobScheduler('s', repeat as never, { name: 'report' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect((err as Error).message).toMatch(message);
    expect(await queue.getJobSchedulersCount()).toBe(0);
  });

  it('refuses a bad id, template or per-job option', async () => {
    await expect(queue.upsertJobScheduler('', { every: 60_000 }, { name: 'report' })).rejects.toThrow(/scheduler id it is empty/);
    await expect(queue.upsertJobScheduler('s', { every: 60_000 }, {} as never)).rejects.toThrow(/needs a name/);
    await expect(queue.upsertJobScheduler('s', { every: 60_000 }, { name: 'report', payload: 1, data: 2 })).rejects.toThrow(
      /payload or data .* not both/,
    );
    await expect(
      queue.upsertJobScheduler('s', { every: 60_000 }, { name: 'report', opts: { delayMs: 5 } as never }),
    ).rejects.toThrow(/unknown scheduled job option "delayMs" \(use startDate/);
    await expect(queue.upsertJobScheduler('s', { every: 60_000 }, { name: 'report', opts: { attempts: 0 } })).rejects.toThrow(
      PgQueueConfigError,
    );
    expect(await queue.getJobSchedulersCount()).toBe(0);
  });

  it('upserts, reads, pages, counts, pauses, resumes and removes; an upsert of the same timing keeps the next tick', async () => {
    const s = await queue.upsertJobScheduler(
      'report:tenant-42',
      { pattern: '0 3 * * *', tz: 'Europe/Berlin', limit: 5 },
      { name: 'report', data: { tenantId: 42 }, opts: { priority: 2, attempts: 5 } },
    );
    expect(s).toMatchObject({
      id: 'report:tenant-42',
      queue: 'reports',
      name: 'report',
      pattern: '0 3 * * *',
      every: null,
      tz: 'Europe/Berlin',
      limit: 5,
      iterationCount: 0,
      paused: false,
      source: 'runtime',
      template: { payload: { tenantId: 42 }, opts: { priority: 2, attempts: 5 } },
    });
    expect(s.next!.getTime()).toBeGreaterThan(Date.now());
    await queue.upsertJobScheduler('b', { every: 60_000 }, { name: 'report' });
    await queue.upsertJobScheduler('c', { every: 120_000, startDate: '2099-01-01T00:00:00Z' }, { name: 'report' });
    expect(await queue.getJobSchedulersCount()).toBe(3);
    expect((await queue.getJobSchedulers()).map((x) => x.id)).toEqual(['b', 'report:tenant-42', 'c']);
    expect((await queue.getJobSchedulers(1, 1)).map((x) => x.id)).toEqual(['report:tenant-42']);
    expect((await queue.getJobSchedulers(0, -1, false)).map((x) => x.id)).toEqual(['c', 'report:tenant-42', 'b']);

    // Same timing again (a boot that upserts it every time): next tick kept, template replaced.
    await setNext('report:tenant-42', '2030-01-01T02:00:00Z');
    const again = await queue.upsertJobScheduler(
      'report:tenant-42',
      { pattern: '0 3 * * *', tz: 'Europe/Berlin' },
      { name: 'report', payload: { v: 2 } },
    );
    expect(again.next!.toISOString()).toBe('2030-01-01T02:00:00.000Z');
    expect(again.template.payload).toEqual({ v: 2 });
    // A new timing starts over.
    const moved = await queue.upsertJobScheduler(
      'report:tenant-42',
      { pattern: '0 4 * * *', tz: 'Europe/Berlin' },
      { name: 'report' },
    );
    expect(moved.next!.toISOString()).not.toBe('2030-01-01T02:00:00.000Z');

    expect(await queue.pauseJobScheduler('b')).toBe(true);
    await setNext('b', '2020-01-01T00:00:00Z');
    expect(await tick(new Date())).toBe(0); // paused: not due
    expect((await queue.getJobScheduler('b'))!.paused).toBe(true);
    expect(await queue.resumeJobScheduler('b')).toBe(true);
    const resumed = (await queue.getJobScheduler('b'))!;
    expect(resumed.paused).toBe(false);
    expect(resumed.next!.getTime()).toBeGreaterThan(Date.now() - 60_000); // the missed ticks skipped
    expect(await queue.pauseJobScheduler('nope')).toBe(false);

    expect(await queue.removeJobScheduler('b')).toBe(true);
    expect(await queue.removeJobScheduler('b')).toBe(false);
    expect(await queue.getJobScheduler('b')).toBeNull();

    const svc = app.get(QueueService);
    expect(await svc.getJobSchedulersCount('reports')).toBe(2);
    expect((await svc.getJobScheduler('reports', 'c'))!.every).toBe(120_000);
  });

  it("joins the caller's transaction: rolled back, no scheduler; committed, there", async () => {
    const pool = testPool(t.db.url, 1);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await queue.upsertJobScheduler('tx', { every: 60_000 }, { name: 'report' }, { client });
      await client.query('ROLLBACK');
      expect(await queue.getJobScheduler('tx')).toBeNull();
      await client.query('BEGIN');
      await queue.upsertJobScheduler('tx', { every: 60_000 }, { name: 'report' }, { client });
      expect(await queue.getJobScheduler('tx')).toBeNull(); // not committed yet
      await client.query('COMMIT');
      expect(await queue.getJobScheduler('tx')).not.toBeNull();
      // A client outside a transaction is refused, as add() refuses it.
      await expect(queue.upsertJobScheduler('tx2', { every: 60_000 }, { name: 'report' }, { client })).rejects.toThrow(
        /not in a transaction|transaction/,
      );
    } finally {
      client.release();
      await pool.end();
    }
  });

  it('a pass enqueues each due tick once with run_at = the tick, moves next forward, and ends at limit', async () => {
    await queue.upsertJobScheduler(
      'every',
      { every: 10_000, limit: 4 },
      { name: 'report', payload: { a: 1 }, opts: { priority: 3 } },
    );
    await setNext('every', '2030-01-01T00:00:00Z');
    expect(await tick('2029-12-31T23:59:59Z')).toBe(0); // not due yet
    expect(await tick('2030-01-01T00:00:00Z')).toBe(1);
    expect(await tick('2030-01-01T00:00:00Z')).toBe(0); // the same tick again: nothing
    expect(await tick('2030-01-01T00:00:25Z')).toBe(1); // two more ticks (10 s, 20 s)
    expect(await runAts()).toEqual(['2030-01-01T00:00:00.000Z', '2030-01-01T00:00:10.000Z', '2030-01-01T00:00:20.000Z']);
    const s = (await queue.getJobScheduler('every'))!;
    expect(s.iterationCount).toBe(3);
    expect(s.next!.toISOString()).toBe('2030-01-01T00:00:30.000Z');
    const job = (await t.pool.query(`SELECT payload, priority FROM pgqueue.jobs LIMIT 1`)).rows[0];
    expect(job).toEqual({ payload: { a: 1 }, priority: 3 });
    // The fourth is the last: the scheduler ends and is removed (BullMQ removes it too).
    expect(await tick('2030-01-01T00:01:00Z')).toBe(1);
    expect(await runAts()).toHaveLength(4);
    expect(await queue.getJobScheduler('every')).toBeNull();
  });

  it('endDate ends the scheduler after its last tick', async () => {
    await queue.upsertJobScheduler('ends', { every: 10_000, endDate: '2031-01-01T00:00:15Z' }, { name: 'report' });
    await setNext('ends', '2031-01-01T00:00:00Z');
    await tick('2031-01-01T00:00:40Z');
    expect(await runAts()).toEqual(['2031-01-01T00:00:00.000Z', '2031-01-01T00:00:10.000Z']);
    expect(await queue.getJobScheduler('ends')).toBeNull();
  });

  it('after downtime, ticks older than cronCatchUpMs (1 hour) are skipped and the newer ones enqueued once each', async () => {
    await queue.upsertJobScheduler('hourly', { pattern: '0 * * * *' }, { name: 'report' });
    await setNext('hourly', '2030-05-01T00:00:00Z'); // the node was down from before midnight to 03:30
    await tick('2030-05-01T03:30:00Z');
    expect(await runAts()).toEqual(['2030-05-01T03:00:00.000Z']); // 00:00, 01:00 and 02:00 are over an hour old
    expect((await queue.getJobScheduler('hourly'))!.next!.toISOString()).toBe('2030-05-01T04:00:00.000Z');
  });

  it('ticks 02:30 Europe/Berlin once a day across the spring-forward and fall-back days', async () => {
    await queue.upsertJobScheduler('dst', { pattern: '30 2 * * *', tz: 'Europe/Berlin' }, { name: 'report' });
    const step = cronTicks('30 2 * * *', 'Europe/Berlin', 'test');
    for (const from of ['2026-03-27T12:00:00Z', '2026-10-23T12:00:00Z']) {
      await setNext('dst', step(new Date(from))!.toISOString());
      for (let h = 1; h <= 4 * 24; h++) await tick(new Date(new Date(from).getTime() + h * 3_600_000));
    }
    expect(await runAts()).toEqual([
      '2026-03-28T01:30:00.000Z', // CET
      '2026-03-29T01:30:00.000Z', // spring-forward day: 02:30 does not exist, runs once at 03:30 CEST
      '2026-03-30T00:30:00.000Z', // CEST
      '2026-03-31T00:30:00.000Z',
      '2026-10-24T00:30:00.000Z', // CEST
      '2026-10-25T01:30:00.000Z', // fall-back day: 02:30 happens twice, runs once (CET)
      '2026-10-26T01:30:00.000Z',
      '2026-10-27T01:30:00.000Z',
    ]);
  });

  it('after downtime ending inside the fall-back hour, the 02:30 CET tick still runs (the window starts within the repeated hour)', async () => {
    await queue.upsertJobScheduler('dst-down', { pattern: '30 2 * * *', tz: 'Europe/Berlin' }, { name: 'report' });
    await setNext('dst-down', '2026-10-20T00:30:00Z'); // down for days
    // The catch-up window (one hour) starts at 00:45Z = 02:45 CEST, inside the hour that repeats:
    // croner asked from there answers the next day, and 02:30 CET (01:30Z) would be lost.
    await tick('2026-10-25T01:45:00Z');
    expect(await runAts()).toEqual(['2026-10-25T01:30:00.000Z']);
    expect((await queue.getJobScheduler('dst-down'))!.next!.toISOString()).toBe('2026-10-26T01:30:00.000Z');
  });

  it('finds the due ones among thousands of schedulers with one statement per 500, by the due index', async () => {
    await t.pool.query(`
      INSERT INTO pgqueue.job_schedulers (queue, id, every_ms, job_name, next_run_at)
      SELECT 'reports', 'tenant-' || i, 60000, 'report',
             CASE WHEN i % 100 = 0 THEN '2032-01-01T00:00:00Z'::timestamptz ELSE '2033-01-01T00:00:00Z'::timestamptz END
      FROM generate_series(1, 5000) i`);
    await t.pool.query('ANALYZE pgqueue.job_schedulers');
    const store = new JobStore(t.pool, {
      schema: 'pgqueue',
      retention: {} as never,
      asyncCommit: true,
      preparedStatements: false,
    });
    const plan = (await t.pool.query(`EXPLAIN ${store.schedulers.q.claimDue}`, ['2032-01-01T00:00:01Z', 500])).rows.map(
      (r: { 'QUERY PLAN': string }) => r['QUERY PLAN'],
    );
    expect(plan.join('\n')).toMatch(/Index Scan using job_schedulers_due_idx/);
    // Count the statements of one pass over 50 due schedulers of 5,000.
    const sent: string[] = [];
    const connect = t.pool.connect.bind(t.pool);
    const counting = Object.create(t.pool) as typeof t.pool;
    (counting as { connect: unknown }).connect = async () => {
      const c = await connect();
      const query = c.query.bind(c);
      (c as { query: unknown }).query = (q: unknown, ...rest: unknown[]) => {
        sent.push(typeof q === 'string' ? q : (q as { text: string }).text);
        return (query as (...a: unknown[]) => unknown)(q, ...rest);
      };
      return c;
    };
    const counted = new JobStore(counting, {
      schema: 'pgqueue',
      retention: {} as never,
      asyncCommit: true,
      preparedStatements: false,
    });
    expect(
      await counted.schedulers.tick(500, new Date('2032-01-01T00:00:01Z'), (due) =>
        due.map((d) => ({ queue: d.queue, id: d.id, runs: [d.next_run_at], next: new Date('2032-01-01T00:01:00Z') })),
      ),
    ).toBe(50);
    expect(sent.filter((q) => !/^(BEGIN|COMMIT)$/.test(q))).toHaveLength(2); // claim + write, for all 50
    expect(await runAts()).toHaveLength(50);
  });
});
