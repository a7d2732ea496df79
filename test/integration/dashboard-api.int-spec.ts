import 'reflect-metadata';
import { Injectable, Logger, type CanActivate, type ExecutionContext, type INestApplication } from '@nestjs/common';
import type { Pool } from 'pg';
import request from 'supertest';
import { PgQueueConfigError, QueueService } from '../../lib';
import { PgQueueDashboardModule, type PgQueueDashboardOptions } from '../../lib/dashboard';
import { bootHttpApp, PLATFORMS, type Platform } from '../support/dashboard-app';
import { createTestDatabase, testPool, type TestDatabase } from '../support/database';

// The dashboard's JSON API, pages and safety rules over HTTP, on real PostgreSQL, on Express and
// on Fastify (every test runs on both). Jobs are seeded with SQL so states are exact; workers are
// off, so nothing moves unless a test moves it.

const HDR = { 'X-PgQueue-Dashboard': '1', 'Content-Type': 'application/json' };
const H = 1_000_000; // history ids start here, clear of the jobs identity

let db: TestDatabase;
let sql: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  sql = testPool(db.url, 2);
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

/** Waiting jobs of `queue`: ids in insertion order. */
async function seedWaiting(
  queue: string,
  rows: { name?: string; payload?: unknown; priority?: number; uniqueKey?: string; delayMs?: number }[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const r of rows) {
    const {
      rows: [x],
    } = await sql.query<{ id: string }>(
      `INSERT INTO pgqueue.jobs (queue, name, payload, priority, run_at, unique_key)
       VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond' - interval '1 second', $6) RETURNING id::text`,
      [queue, r.name ?? 'job', JSON.stringify(r.payload ?? {}), r.priority ?? 0, r.delayMs ?? 0, r.uniqueKey ?? null],
    );
    ids.push(x.id);
  }
  return ids;
}

let nextHistoryId = H;
/** Finished jobs of `queue` in `state`: ids, ascending. */
async function seedHistory(
  queue: string,
  state: 'completed' | 'failed' | 'cancelled',
  n: number,
  o: { name?: string; payload?: unknown } = {},
): Promise<string[]> {
  const first = nextHistoryId;
  nextHistoryId += n;
  await sql.query(
    `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at, locked_by)
     SELECT g, $2, $3, $4::jsonb, $5, 0, now(), 1, 1,
            CASE WHEN $5 = 'completed' THEN '[]'::jsonb
                 ELSE jsonb_build_array(jsonb_build_object('attempt', 1, 'name', 'Error', 'message', 'boom', 'at', now(), 'worker', 'node-a')) END,
            now(), now(), 'node-a'
     FROM generate_series($1::bigint, $1::bigint + $6 - 1) g`,
    [first, queue, o.name ?? 'job', JSON.stringify(o.payload ?? {}), state, n],
  );
  return Array.from({ length: n }, (_, i) => String(first + i));
}

class DenyUnlessHeader implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    return req.headers['x-test-auth'] === 'yes';
  }
}
Injectable()(DenyUnlessHeader);

describe.each(PLATFORMS)('dashboard on %s', (platform: Platform) => {
  const apps: INestApplication[] = [];
  async function boot(dash: PgQueueDashboardOptions, extra: { repeat?: boolean } = {}): Promise<INestApplication> {
    // Tests seed with SQL between reads, which no dashboard action announces: counts are taken
    // afresh on every read (their reuse is test/unit/dashboard-costly-reads.spec.ts's).
    dash = { countsBudget: 1, ...dash };
    const app = await bootHttpApp(platform, {
      options: { connection: db.url, workers: false },
      queues: [
        {
          name: `orders-${platform}`,
          ...(extra.repeat ? { repeat: [{ name: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlin' }] } : {}),
        },
        { name: `mail-${platform}` },
      ],
      imports: [PgQueueDashboardModule.register(dash)],
    });
    apps.push(app);
    return app;
  }
  afterAll(async () => {
    for (const a of apps) await a.close();
  });

  let app: INestApplication;
  const http = () => request(app.getHttpServer());
  const Q = `orders-${platform}`;
  const M = `mail-${platform}`;
  const post = (url: string, body: unknown) => http().post(url).set(HDR).send(JSON.stringify(body));

  beforeAll(async () => {
    app = await boot({ public: true, title: 'Shop <queues>' }, { repeat: true });
  });

  describe('pages and assets', () => {
    it.each(['/queues', '/queues/queues/x', '/queues/jobs/12', '/queues/schedules', '/queues/nodes'])(
      'GET %s serves index.html with the CSP and settings',
      async (url) => {
        const res = await http().get(url);
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toMatch(/^text\/html/);
        expect(res.headers['content-security-policy']).toBe(
          "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        );
        expect(res.headers['x-content-type-options']).toBe('nosniff');
        expect(res.headers['referrer-policy']).toBe('no-referrer');
        expect(res.text).toContain('<meta name="pgq-base" content="/queues">');
        expect(res.text).toContain('<meta name="pgq-read-only" content="false">');
        // The title is escaped, never markup.
        expect(res.text).toContain('<title>Shop &#60;queues&#62;</title>');
        expect(res.text).not.toContain('<script>');
      },
    );

    it('assets: a file of the folder with its type, nosniff and cache rule', async () => {
      const res = await http().get('/queues/assets/favicon.svg');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^image\/svg\+xml/);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      // Not a hashed name: revalidated, not cached for a year.
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(Buffer.from(res.body as Buffer).toString('utf8') || res.text).toContain('<svg');
    });

    it('assets: unknown or unsafe names answer 404, never a file outside the folder', async () => {
      for (const name of ['nope.js', 'index.html', '..%2F..%2Fpackage.json', '.env', 'x.exe']) {
        const res = await http().get(`/queues/assets/${name}`);
        expect([res.status, name]).toEqual([404, name]);
        expect(res.text).not.toContain('"name": "nestjs-pg-queue"');
      }
    });
  });

  describe('reads', () => {
    it('overview: counts per queue (cancelled included), paused, registered, and 60 minutes of throughput', async () => {
      await seedWaiting(M, [{}, {}, { delayMs: 3_600_000 }]);
      const failedIds = await seedHistory(M, 'failed', 2);
      await seedHistory(M, 'cancelled', 1);
      const completedIds = await seedHistory(M, 'completed', 4);
      await sql.query(`INSERT INTO pgqueue.queues (name, paused) VALUES ($1, true)`, [`ghost-${platform}`]);
      const res = await http().get('/queues/api/overview');
      expect(res.status).toBe(200);
      const mail = res.body.queues.find((q: { name: string }) => q.name === M);
      expect(mail).toMatchObject({
        waiting: 2,
        delayed: 1,
        waitingChildren: 0,
        active: 0,
        stalled: 0,
        failed: 2,
        cancelled: 1,
        paused: false,
        registered: true,
      });
      expect(mail.oldestWaitingAgeMs).toBeGreaterThan(0);
      expect(res.body.queues.find((q: { name: string }) => q.name === Q)).toMatchObject({ waiting: 0, registered: true });
      expect(res.body.queues.find((q: { name: string }) => q.name === `ghost-${platform}`)).toMatchObject({
        paused: true,
        registered: false,
      });
      const t = res.body.throughput;
      expect(t.minutes).toHaveLength(60);
      expect(t.completed).toHaveLength(60);
      // Counted in the minutes they finished in (the seeding may straddle a minute, and the
      // request may come in the next one): both platforms seed, so at least this one's.
      const inTheirMinutes = async (ids: string[], counts: number[]) => {
        const { rows } = await sql.query<{ m: Date }>(
          `SELECT DISTINCT date_trunc('minute', finished_at) AS m FROM pgqueue.job_history WHERE id = ANY($1::bigint[])`,
          [ids],
        );
        return rows.reduce((n, r) => n + (counts[t.minutes.indexOf(r.m.toISOString())] ?? 0), 0);
      };
      expect(await inTheirMinutes(completedIds, t.completed)).toBeGreaterThanOrEqual(4);
      expect(await inTheirMinutes(failedIds, t.failed)).toBeGreaterThanOrEqual(2);
      expect(res.body.readOnly).toBe(false);
      expect(typeof res.body.now).toBe('string');
    });

    it('overview: every queue once, in name order, whichever table holds its jobs (waiting ones found by the skip scan)', async () => {
      const p = `skip-${platform}`;
      // Three queues with waiting jobs, inserted out of name order: the skip scan must step over each.
      await seedWaiting(`${p}-e`, [{ delayMs: 3_600_000 }]);
      await seedWaiting(`${p}-a`, [{}, {}]);
      await seedWaiting(`${p}-c`, [{}, { delayMs: 3_600_000 }, {}]);
      await seedHistory(`${p}-b`, 'failed', 2);
      await seedHistory(`${p}-d`, 'cancelled', 1);
      await seedHistory(`${p}-c`, 'failed', 1);
      await sql.query(
        `INSERT INTO pgqueue.jobs (queue, name, payload, state, locked_by, locked_until, started_at, attempt)
         VALUES ($1, 'job', '{}', 'active', 'node-x', now() - interval '1 second', now(), 1),
                ($1, 'job', '{}', 'active', 'node-x', now() + interval '1 minute', now(), 1)`,
        [`${p}-f`],
      );
      const res = await http().get('/queues/api/overview');
      type Row = {
        name: string;
        waiting: number;
        delayed: number;
        active: number;
        stalled: number;
        failed: number;
        cancelled: number;
      };
      const rows = (res.body.queues as Row[]).filter((q) => q.name.startsWith(p));
      const pick = ({ name, waiting, delayed, active, stalled, failed, cancelled }: Row) => ({
        name,
        counts: [waiting, delayed, active, stalled, failed, cancelled],
      });
      expect(rows.map(pick)).toEqual([
        { name: `${p}-a`, counts: [2, 0, 0, 0, 0, 0] },
        { name: `${p}-b`, counts: [0, 0, 0, 0, 2, 0] },
        { name: `${p}-c`, counts: [2, 1, 0, 0, 1, 0] },
        { name: `${p}-d`, counts: [0, 0, 0, 0, 0, 1] },
        { name: `${p}-e`, counts: [0, 1, 0, 0, 0, 0] },
        { name: `${p}-f`, counts: [0, 0, 2, 1, 0, 0] },
      ]);
      const names = (res.body.queues as Row[]).map((q) => q.name);
      expect(names).toEqual([...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      expect(new Set(names).size).toBe(names.length);
      // The queue page counts one queue with the same statements.
      expect((await http().get(`/queues/api/queues/${p}-c`)).body.counts).toMatchObject({ waiting: 2, delayed: 1, failed: 1 });
    });

    it('throughput: earlier minutes keep their counts from one poll to the next (the service recounts only the last two)', async () => {
      const tp = await boot({ public: true, path: '/tp' });
      const ids = await seedHistory(`tp-${platform}`, 'completed', 3);
      // One statement fixes the minute and puts the jobs in it (mid-minute), from the database's
      // clock: two reads of now() could straddle a minute boundary and name different minutes.
      const {
        rows: [{ minute }],
      } = await sql.query<{ minute: Date }>(
        `WITH m AS (SELECT date_trunc('minute', now()) - interval '10 minutes' AS minute),
              moved AS (UPDATE pgqueue.job_history SET finished_at = (SELECT minute FROM m) + interval '30 seconds'
                        WHERE id = ANY($1::bigint[]))
         SELECT minute FROM m`,
        [ids],
      );
      const at = (body: { throughput: { minutes: string[]; completed: number[] } }) =>
        body.throughput.completed[body.throughput.minutes.indexOf(minute.toISOString())];
      const first = (await request(tp.getHttpServer()).get('/tp/api/overview')).body;
      const second = (await request(tp.getHttpServer()).get('/tp/api/overview')).body;
      expect(at(first)).toBeGreaterThanOrEqual(3);
      expect(at(second)).toBe(at(first));
    });

    it('throughput: a finished job counts in the minute it finished in (start inclusive, end exclusive), completed and failed apart', async () => {
      const tp = await boot({ public: true, path: '/tp-minutes' });
      const back = platform === 'express' ? 30 : 40; // a minute of its own per platform: throughput spans every queue
      const {
        rows: [{ m }],
      } = await sql.query<{ m: Date }>(`SELECT date_trunc('minute', now()) - $1 * interval '1 minute' AS m`, [back]);
      const q = `tpm-${platform}`;
      const done = await seedHistory(q, 'completed', 3);
      const failed = await seedHistory(q, 'failed', 2);
      const [cancelled] = await seedHistory(q, 'cancelled', 1);
      const at = (id: string, offset: string) =>
        sql.query(`UPDATE pgqueue.job_history SET finished_at = $2::timestamptz + $3::interval WHERE id = $1`, [id, m, offset]);
      await at(done[0], '0 seconds');
      await at(done[1], '59.999999 seconds');
      await at(done[2], '-1 microsecond');
      await at(failed[0], '30 seconds');
      await at(failed[1], '1 minute');
      await at(cancelled, '10 seconds');
      const body = (await request(tp.getHttpServer()).get('/tp-minutes/api/overview')).body as {
        throughput: { minutes: string[]; completed: number[]; failed: number[] };
      };
      const minute = (shift: number) => {
        const i = body.throughput.minutes.indexOf(new Date(m.getTime() + shift * 60_000).toISOString());
        return { completed: body.throughput.completed[i], failed: body.throughput.failed[i] };
      };
      expect(minute(-1)).toEqual({ completed: 1, failed: 0 });
      expect(minute(0)).toEqual({ completed: 2, failed: 1 });
      expect(minute(1)).toEqual({ completed: 0, failed: 1 });
    });

    it('queue: counts, options, retention, names seen', async () => {
      const q = `names-${platform}`;
      await seedWaiting(Q, [{ name: 'ship' }]);
      await seedHistory(Q, 'failed', 1, { name: 'bill' });
      const res = await http().get(`/queues/api/queues/${Q}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        name: Q,
        paused: false,
        options: { concurrency: 10, globalConcurrency: null, limiter: null, deadLetterQueue: null },
      });
      expect(res.body.counts).toMatchObject({ waiting: 1, failed: 1 });
      expect(res.body.names).toEqual(expect.arrayContaining(['bill', 'ship', 'nightly']));
      expect(res.body.retention).toMatchObject({ completedMs: 86_400_000 });
      const unknown = await http().get(`/queues/api/queues/${q}`);
      expect(unknown.status).toBe(200);
      expect(unknown.body).toMatchObject({ name: q, options: null, counts: { waiting: 0 } });
    });

    it('waiting jobs page by keyset in claim order: page 2 continues page 1, no gaps, no repeats', async () => {
      const q = `pages-${platform}`;
      const ids = await seedWaiting(q, [{ priority: 1 }, {}, {}, { priority: -1 }, {}, { priority: 1 }, {}]);
      const expected = [ids[3], ids[1], ids[2], ids[4], ids[6], ids[0], ids[5]];
      const seen: string[] = [];
      let before: string | null = null;
      let pages = 0;
      do {
        const res: request.Response = await http()
          .get(`/queues/api/queues/${q}/jobs`)
          .query({ state: 'waiting', limit: 3, ...(before ? { before } : {}) });
        expect(res.status).toBe(200);
        seen.push(...res.body.jobs.map((j: { id: string }) => j.id));
        before = res.body.next;
        pages++;
      } while (before && pages < 10);
      expect(seen).toEqual(expected);
      expect(pages).toBe(3);
    });

    it('finished jobs page newest first by id; a delayed job lists under delayed only', async () => {
      const q = `hist-${platform}`;
      const ids = await seedHistory(q, 'failed', 5);
      const [delayed] = await seedWaiting(q, [{ delayMs: 600_000 }]);
      const p1 = await http().get(`/queues/api/queues/${q}/jobs?state=failed&limit=2`);
      const p2 = await http().get(`/queues/api/queues/${q}/jobs?state=failed&limit=2&before=${p1.body.next}`);
      const p3 = await http().get(`/queues/api/queues/${q}/jobs?state=failed&limit=2&before=${p2.body.next}`);
      const got = [...p1.body.jobs, ...p2.body.jobs, ...p3.body.jobs].map((j: { id: string }) => j.id);
      expect(got).toEqual([...ids].reverse());
      expect(p3.body.next).toBeNull();
      expect(p1.body.jobs[0]).toMatchObject({
        state: 'failed',
        lockedBy: 'node-a',
        lastError: { name: 'Error', message: 'boom' },
      });
      const d = await http().get(`/queues/api/queues/${q}/jobs?state=delayed`);
      expect(d.body.jobs.map((j: { id: string }) => j.id)).toEqual([delayed]);
      const w = await http().get(`/queues/api/queues/${q}/jobs?state=waiting`);
      expect(w.body.jobs).toEqual([]);
    });

    it('filters: name, uniqueKey, payload containment, id', async () => {
      const q = `filter-${platform}`;
      const [a, , c] = await seedWaiting(q, [
        { name: 'ship', payload: { orderId: 42, tags: ['x'] }, uniqueKey: 'order-42' },
        { name: 'bill', payload: { orderId: 43 } },
        { name: 'ship', payload: { orderId: 44 } },
      ]);
      const ids = async (query: Record<string, string>) => {
        const res = await http().get(`/queues/api/queues/${q}/jobs`).query(query);
        expect(res.status).toBe(200);
        return res.body.jobs.map((j: { id: string }) => j.id);
      };
      expect(await ids({ state: 'waiting', name: 'ship' })).toEqual([a, c]);
      expect(await ids({ state: 'waiting', uniqueKey: 'order-42' })).toEqual([a]);
      expect(await ids({ state: 'waiting', payload: '{"orderId":42}' })).toEqual([a]);
      expect(await ids({ state: 'waiting', payload: '{"tags":["x"]}', name: 'ship' })).toEqual([a]);
      expect(await ids({ state: 'waiting', payload: '{"orderId":99}' })).toEqual([]);
      expect(await ids({ id: c })).toEqual([c]);
      expect(await ids({ id: '999999999' })).toEqual([]);
      const h = await seedHistory(q, 'completed', 2, { name: 'done', payload: { orderId: 7 } });
      expect(await ids({ state: 'completed', payload: '{"orderId":7}' })).toEqual([...h].reverse());
    });

    it('a filtered page examines a bounded number of rows and says where to continue', async () => {
      const q = `scan-${platform}`;
      const [rare] = await seedHistory(q, 'completed', 1, { name: 'rare' });
      await seedHistory(q, 'completed', 5001, { name: 'common' });
      const p1 = await http().get(`/queues/api/queues/${q}/jobs?state=completed&name=rare`);
      expect(p1.status).toBe(200);
      expect(p1.body.jobs).toEqual([]);
      expect(p1.body.next).not.toBeNull();
      const p2 = await http().get(`/queues/api/queues/${q}/jobs?state=completed&name=rare&before=${p1.body.next}`);
      expect(p2.body.jobs.map((j: { id: string }) => j.id)).toEqual([rare]);
      expect(p2.body.next).toBeNull();
    });

    it('job: the job with uniqueKey, lockedBy, history and a timeline naming the node of each attempt; 404 and 400', async () => {
      const q = `job-${platform}`;
      const [id] = await seedHistory(q, 'failed', 1);
      const res = await http().get(`/queues/api/jobs/${id}`);
      expect(res.status).toBe(200);
      expect(res.body.job).toMatchObject({ id, queue: q, state: 'failed', lockedBy: 'node-a', history: true, uniqueKey: null });
      expect(res.body.timeline.map((t: { event: string }) => t.event)).toEqual(['created', 'attempt']);
      expect(res.body.timeline[1]).toMatchObject({ attempt: 1, node: 'node-a', outcome: 'failed', error: 'Error: boom' });
      const [live] = await seedWaiting(q, [{ uniqueKey: 'k1' }]);
      const l = await http().get(`/queues/api/jobs/${live}`);
      expect(l.body.job).toMatchObject({ id: live, state: 'waiting', uniqueKey: 'k1', history: false, lockedBy: null });
      const missing = await http().get('/queues/api/jobs/987654321');
      expect(missing.status).toBe(404);
      expect(missing.body.error).toMatch(/No job 987654321/);
      for (const bad of ['abc', '0', '-1', '99999999999999999999']) {
        const r = await http().get(`/queues/api/jobs/${bad}`);
        expect([bad, r.status]).toEqual([bad, 400]);
        expect(r.body.error).toMatch(/positive integer/);
      }
    });

    it('flows: a job page lists its parents and children with their states; the queue page lists jobs waiting on children', async () => {
      const flow = await app.get(QueueService).addFlow({
        queue: Q,
        name: 'ship',
        payload: {},
        children: [
          { queue: M, name: 'pack', payload: {} },
          { queue: M, name: 'label', payload: {} },
        ],
      });
      const parent = flow.job.id;
      const [done, open] = flow.children.map((c) => c.job.id);
      // One child finishes (workers are off: moved to history by hand; the release trigger runs).
      await sql.query(
        `WITH d AS (DELETE FROM pgqueue.jobs WHERE id = $1 RETURNING *)
         INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at)
         SELECT id, queue, name, payload, 'completed', priority, run_at, 1, max_attempts, errors, created_at FROM d`,
        [done],
      );
      const p = await http().get(`/queues/api/jobs/${parent}`);
      expect(p.status).toBe(200);
      expect(p.body.job).toMatchObject({ id: parent, state: 'waiting-children' });
      expect(p.body.flow).toEqual({
        parents: [],
        children: [
          { id: done, queue: M, name: 'pack', state: 'completed' },
          { id: open, queue: M, name: 'label', state: 'waiting' },
        ],
        childrenTotal: 2,
        childrenPending: 1,
      });
      const c = await http().get(`/queues/api/jobs/${open}`);
      expect(c.body.flow).toMatchObject({
        parents: [{ id: parent, queue: Q, name: 'ship', state: 'waiting-children' }],
        childrenTotal: 0,
      });
      // A job in no flow has none.
      const [plain] = await seedWaiting(Q, [{}]);
      expect((await http().get(`/queues/api/jobs/${plain}`)).body.flow).toBeNull();
      const list = await http().get(`/queues/api/queues/${Q}/jobs?state=waiting-children`);
      expect(list.status).toBe(200);
      expect(list.body.jobs.map((j: { id: string }) => j.id)).toContain(parent);
      expect(list.body.jobs.every((j: { state: string }) => j.state === 'waiting-children')).toBe(true);
      const detail = await http().get(`/queues/api/queues/${Q}`);
      expect(detail.body.counts['waiting-children']).toBeGreaterThanOrEqual(1);
      const overview = await http().get('/queues/api/overview');
      expect(overview.body.queues.find((r: { name: string }) => r.name === Q).waitingChildren).toBeGreaterThanOrEqual(1);
    });

    it('job: its progress and the trace id of its enqueue, live and in history; none for a job without them', async () => {
      const q = `prog-${platform}`;
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const [live] = await seedWaiting(q, [{}]);
      await sql.query(`UPDATE pgqueue.jobs SET progress = '{"done": 3, "total": 8}', trace = $2 WHERE id = $1`, [
        live,
        { traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'vendor=x' },
      ]);
      const l = await http().get(`/queues/api/jobs/${live}`);
      expect(l.body.job).toMatchObject({ id: live, progress: { done: 3, total: 8 }, traceId });
      const [done] = await seedHistory(q, 'completed', 1);
      await sql.query(`UPDATE pgqueue.job_history SET progress = '100', trace = $2 WHERE id = $1`, [
        done,
        { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      ]);
      expect((await http().get(`/queues/api/jobs/${done}`)).body.job).toMatchObject({ progress: 100, traceId });
      // Retried from the dashboard, a failed job keeps its progress and trace, as queue.retry(id) does.
      const [failed] = await seedHistory(q, 'failed', 1);
      await sql.query(`UPDATE pgqueue.job_history SET progress = '7', trace = $2 WHERE id = $1`, [
        failed,
        { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      ]);
      expect((await post('/queues/api/jobs/retry', { ids: [failed] })).status).toBe(200);
      expect((await http().get(`/queues/api/jobs/${failed}`)).body.job).toMatchObject({ state: 'waiting', progress: 7, traceId });
      // A hand-written trace that is not a traceparent shows no id rather than failing the page.
      await sql.query(`UPDATE pgqueue.job_history SET progress = NULL, trace = '{"traceparent": "junk"}' WHERE id = $1`, [done]);
      expect((await http().get(`/queues/api/jobs/${done}`)).body.job).toMatchObject({ progress: null, traceId: null });
    });

    it('job steps: each durable step of a job with its kind, state, attempt, duration and result; none for a plain job', async () => {
      const q = `steps-${platform}`;
      const [job, plain] = await seedWaiting(q, [{}, {}]);
      await sql.query(
        `INSERT INTO pgqueue.job_steps (job_id, name, seq, kind, status, result, attempt, started_at, finished_at, wake_at) VALUES
           ($1, 'charge', 0, 'step', 'done', '{"id": "ch_1"}', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:01.5Z', NULL),
           ($1, 'cool-off', 1, 'sleep', 'sleeping', NULL, 1, '2026-01-01T00:00:02Z', '2026-01-01T00:00:02Z', '2999-01-01T00:00:00Z')`,
        [job],
      );
      const res = await http().get(`/queues/api/jobs/${job}/steps`);
      expect(res.status).toBe(200);
      expect(res.body.steps).toEqual([
        expect.objectContaining({
          name: 'charge',
          kind: 'step',
          status: 'done',
          attempt: 1,
          durationMs: 1500,
          result: { id: 'ch_1' },
        }),
        expect.objectContaining({
          name: 'cool-off',
          kind: 'sleep',
          status: 'sleeping',
          wakeAt: '2999-01-01T00:00:00.000Z',
          durationMs: null,
        }),
      ]);
      expect((await http().get(`/queues/api/jobs/${plain}/steps`)).body).toEqual({ steps: [] });
      expect((await http().get(`/queues/api/jobs/abc/steps`)).status).toBe(400);
    });

    it("job logs: a page of a live and a finished job, kept through the dashboard's retry; 404 and 400", async () => {
      const q = `logs-${platform}`;
      const logs = (lines: string[], dropped = 0) => JSON.stringify({ lines, bytes: 0, dropped });
      const [live] = await seedWaiting(q, [{}]);
      await sql.query(`UPDATE pgqueue.jobs SET logs = $2 WHERE id = $1`, [live, logs(['one', 'two', 'three'])]);
      expect((await http().get(`/queues/api/jobs/${live}/logs`)).body).toEqual({
        logs: ['one', 'two', 'three'],
        count: 3,
        dropped: 0,
      });
      expect((await http().get(`/queues/api/jobs/${live}/logs?offset=1&limit=1`)).body).toEqual({
        logs: ['two'],
        count: 3,
        dropped: 0,
      });
      const [failed] = await seedHistory(q, 'failed', 1);
      await sql.query(`UPDATE pgqueue.job_history SET logs = $2 WHERE id = $1`, [failed, logs(['<b>markup</b>'], 4)]);
      expect((await http().get(`/queues/api/jobs/${failed}/logs`)).body).toEqual({
        logs: ['<b>markup</b>'],
        count: 1,
        dropped: 4,
      });
      // Retried from the dashboard, a failed job keeps its log, as queue.retry(id) does.
      expect((await post('/queues/api/jobs/retry', { ids: [failed] })).status).toBe(200);
      expect((await http().get(`/queues/api/jobs/${failed}/logs`)).body.logs).toEqual(['<b>markup</b>']);
      // A job that never logged: an empty log; no job: 404; bad input: 400.
      const [plain] = await seedWaiting(q, [{}]);
      expect((await http().get(`/queues/api/jobs/${plain}/logs`)).body).toEqual({ logs: [], count: 0, dropped: 0 });
      expect((await http().get('/queues/api/jobs/987654321/logs')).status).toBe(404);
      for (const bad of [
        'x/logs',
        `${live}/logs?limit=0`,
        `${live}/logs?limit=1001`,
        `${live}/logs?offset=-1`,
        `${live}/logs?from=1`,
      ]) {
        const r = await http().get(`/queues/api/jobs/${bad}`);
        expect([bad, r.status]).toEqual([bad, 400]);
      }
    });

    it('schedules: every job scheduler with its expression, time zone, count and next five runs', async () => {
      // As a worker node's boot stores the code-declared one (this app runs no workers).
      await sql.query(
        `INSERT INTO pgqueue.job_schedulers (queue, id, pattern, tz, job_name, next_run_at, source, count)
         VALUES ($1, 'nightly', '0 3 * * *', 'Europe/Berlin', 'nightly', '2030-01-01T02:00:00Z', 'code', 7) ON CONFLICT DO NOTHING`,
        [Q],
      );
      const res = await http().get('/queues/api/schedules');
      expect(res.status).toBe(200);
      const s = res.body.schedules.find((x: { queue: string }) => x.queue === Q);
      expect(s).toMatchObject({
        id: 'nightly',
        name: 'nightly',
        cron: '0 3 * * *',
        every: null,
        tz: 'Europe/Berlin',
        source: 'code',
        paused: false,
        iterationCount: 7,
      });
      expect(s.next).toHaveLength(5);
      expect(s.next[0]).toBe('2030-01-01T02:00:00.000Z');
      // 03:00 in Berlin is 01:00 or 02:00 UTC, each a day after the previous.
      for (const t of s.next) expect(new Date(t).getUTCHours()).toBeGreaterThanOrEqual(1);
      expect(new Date(s.next[1]).getTime() - new Date(s.next[0]).getTime()).toBeGreaterThanOrEqual(23 * 3_600_000);
    });
  });

  describe('bad input: 400 with a message saying what to change', () => {
    it.each([
      ['/queues/api/queues/bad%20name', /Invalid queue name/],
      ['/queues/api/queues/x/jobs', /"state" is required/],
      ['/queues/api/queues/x/jobs?state=done', /State "done" is not one of/],
      ['/queues/api/queues/x/jobs?state=waiting&limit=0', /limit must be an integer from 1 to 200/],
      ['/queues/api/queues/x/jobs?state=waiting&limit=201', /limit must be/],
      ['/queues/api/queues/x/jobs?state=waiting&before=garbage', /Cursor "before" is not valid/],
      [
        `/queues/api/queues/x/jobs?state=waiting&before=${Buffer.from('{"id":"5"}').toString('base64url')}`,
        /Cursor "before" is not valid/,
      ],
      ['/queues/api/queues/x/jobs?state=waiting&payload=%7Bnope', /payload must be JSON/],
      ['/queues/api/queues/x/jobs?state=waiting&payload=42', /JSON object or array/],
      ['/queues/api/queues/x/jobs?state=failed&uniqueKey=k', /uniqueKey finds live jobs only/],
      ['/queues/api/queues/x/jobs?state=waiting&sort=id', /Unknown query parameter\(s\) sort/],
      ['/queues/api/queues/x/jobs?state=waiting&state=failed', /more than once/],
      ['/queues/api/queues/x/jobs?id=x1', /positive integer/],
    ])('GET %s', async (url, message) => {
      const res = await http().get(url);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(message);
    });

    it.each([
      ['/queues/api/jobs/retry', {}, /"ids": an array of 1 to 1000 job ids/],
      ['/queues/api/jobs/retry', { ids: [] }, /"ids"/],
      ['/queues/api/jobs/cancel', { ids: ['1', 'x'] }, /positive integer/],
      ['/queues/api/jobs/remove', { ids: ['1'], extra: 1 }, /Unknown field\(s\) extra/],
      ['/queues/api/jobs/remove', [1], /must be a JSON object/],
      ['/queues/api/queues/bad%20q/pause', {}, /Invalid queue name/],
      ['/queues/api/queues/x/pause', { now: true }, /Unknown field/],
      ['/queues/api/queues/x/retry-failed', { name: 5 }, /"name" must be a job name/],
    ])('POST %s %j', async (url, body, message) => {
      const res = await post(url, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(message);
    });

    it('a body that is not JSON is refused with 400', async () => {
      const res = await http().post('/queues/api/jobs/retry').set(HDR).send('{"ids": [');
      expect(res.status).toBe(400);
    });
  });

  describe('actions', () => {
    it('retry: failed, cancelled and completed jobs, single and several, back to waiting; others ignored', async () => {
      const q = `retry-${platform}`;
      const failed = await seedHistory(q, 'failed', 2);
      const [cancelled] = await seedHistory(q, 'cancelled', 1);
      const [completed] = await seedHistory(q, 'completed', 1);
      const one = await post('/queues/api/jobs/retry', { ids: [failed[0]] });
      expect(one.status).toBe(200);
      expect(one.body).toEqual({ retried: [failed[0]] });
      const [waiting] = await seedWaiting(q, [{}]);
      const many = await post('/queues/api/jobs/retry', { ids: [failed[1], cancelled, completed, waiting, '55555555'] });
      expect(many.body.retried.sort()).toEqual([failed[1], cancelled, completed].sort());
      const { rows } = await sql.query(`SELECT id::text, state FROM pgqueue.jobs WHERE queue = $1 ORDER BY id`, [q]);
      // ORDER BY the text id: in text order.
      expect(rows).toEqual([failed[0], failed[1], cancelled, completed, waiting].sort().map((id) => ({ id, state: 'waiting' })));
    });

    it('retry-failed: every failed job of a queue, or of one job name', async () => {
      const q = `retryall-${platform}`;
      await seedHistory(q, 'failed', 3, { name: 'a' });
      await seedHistory(q, 'failed', 2, { name: 'b' });
      const byName = await post(`/queues/api/queues/${q}/retry-failed`, { name: 'b' });
      expect(byName.status).toBe(200);
      expect(byName.body).toEqual({ retried: 2 });
      const all = await post(`/queues/api/queues/${q}/retry-failed`, {});
      expect(all.body).toEqual({ retried: 3 });
      const {
        rows: [n],
      } = await sql.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = $1`, [q]);
      expect(n.n).toBe(5);
    });

    it('cancel: waiting jobs are cancelled, running ones flagged; remove: waiting and finished jobs', async () => {
      const q = `cancel-${platform}`;
      const [w1, w2, running] = await seedWaiting(q, [{}, {}, {}]);
      await sql.query(
        `UPDATE pgqueue.jobs SET state = 'active', locked_by = 'n', locked_until = now() + interval '1 minute', attempt = 1 WHERE id = $1`,
        [running],
      );
      const c = await post('/queues/api/jobs/cancel', { ids: [w1, running] });
      expect(c.status).toBe(200);
      expect(c.body).toEqual({ cancelled: [w1], cancelling: [running] });
      const {
        rows: [h],
      } = await sql.query(`SELECT state FROM pgqueue.job_history WHERE id = $1`, [w1]);
      expect(h.state).toBe('cancelled');
      const r = await post('/queues/api/jobs/remove', { ids: [w2, w1, running] });
      // The running job is never removed.
      expect(r.body.removed.sort()).toEqual([w1, w2].sort());
      const { rows } = await sql.query(
        `SELECT id::text FROM pgqueue.jobs WHERE queue = $1 UNION ALL SELECT id::text FROM pgqueue.job_history WHERE queue = $1`,
        [q],
      );
      expect(rows).toEqual([{ id: running }]);
    });

    it('pause and resume a queue', async () => {
      const p = await post(`/queues/api/queues/${Q}/pause`, {});
      expect(p.status).toBe(200);
      expect(p.body).toEqual({ paused: true });
      expect((await http().get(`/queues/api/queues/${Q}`)).body.paused).toBe(true);
      const r = await post(`/queues/api/queues/${Q}/resume`, {});
      expect(r.body).toEqual({ paused: false });
      expect((await http().get(`/queues/api/queues/${Q}`)).body.paused).toBe(false);
    });

    it('enqueue: a job with options, and the same validation as add()', async () => {
      const ok = await post(`/queues/api/queues/${Q}/jobs`, {
        name: 'ship',
        payload: { orderId: 1 },
        options: { priority: 3, runAt: '2099-01-01T00:00:00Z' },
      });
      expect(ok.status).toBe(200);
      expect(ok.body.job).toMatchObject({
        queue: Q,
        name: 'ship',
        payload: { orderId: 1 },
        priority: 3,
        state: 'delayed',
        runAt: '2099-01-01T00:00:00.000Z',
      });
      const {
        rows: [row],
      } = await sql.query(`SELECT name, priority FROM pgqueue.jobs WHERE id = $1`, [ok.body.job.id]);
      expect(row).toEqual({ name: 'ship', priority: 3 });
      const cases: [unknown, string, RegExp][] = [
        [{ name: 'ship', payload: {}, options: { attempts: 0 } }, Q, /attempts/],
        [{ name: 'ship', payload: {}, options: { manager: {} } }, Q, /Unknown job option\(s\) manager/],
        [{ name: 'ship', payload: {}, options: { runAt: 'tomorrow' } }, Q, /not a date/],
        [{ name: '', payload: {} }, Q, /job name/],
        [{ payload: {} }, Q, /needs "name"/],
        [{ name: 'ship' }, Q, /needs "payload"/],
        [{ name: 'ship', payload: {} }, `unregistered-${platform}`, /not registered in this app/],
      ];
      for (const [body, queue, message] of cases) {
        const res = await post(`/queues/api/queues/${queue}/jobs`, body);
        expect([JSON.stringify(body), res.status]).toEqual([JSON.stringify(body), 400]);
        expect(res.body.error).toMatch(message);
      }
    });

    it('an action without the custom header is refused (400), one without a JSON content type too (415)', async () => {
      const [id] = await seedHistory(`csrf-${platform}`, 'failed', 1);
      const noHeader = await http()
        .post('/queues/api/jobs/retry')
        .set('Content-Type', 'application/json')
        .send(JSON.stringify({ ids: [id] }));
      expect(noHeader.status).toBe(400);
      expect(noHeader.body.error).toMatch(/X-PgQueue-Dashboard: 1/);
      const form = await http()
        .post('/queues/api/jobs/retry')
        .set('X-PgQueue-Dashboard', '1')
        .set('Content-Type', 'text/plain')
        .send(JSON.stringify({ ids: [id] }));
      expect(form.status).toBe(415);
      const urlencoded = await http()
        .post('/queues/api/jobs/retry')
        .set('X-PgQueue-Dashboard', '1')
        .type('form')
        .send({ ids: id });
      expect(urlencoded.status).toBe(415);
      const { rows } = await sql.query(`SELECT state FROM pgqueue.job_history WHERE id = $1`, [id]);
      expect(rows).toEqual([{ state: 'failed' }]);
    });
  });

  describe('access', () => {
    const POSTS: [string, unknown][] = [
      ['/queues/api/jobs/retry', { ids: ['1'] }],
      ['/queues/api/jobs/cancel', { ids: ['1'] }],
      ['/queues/api/jobs/remove', { ids: ['1'] }],
      [`/queues/api/queues/q/retry-failed`, {}],
      [`/queues/api/queues/q/pause`, {}],
      [`/queues/api/queues/q/resume`, {}],
      [`/queues/api/queues/q/jobs`, { name: 'x', payload: {} }],
    ];

    it('readOnly: every POST answers 403, reads work, the page says read-only', async () => {
      const ro = await boot({ public: true, readOnly: true, path: '/ro' });
      const [id] = await seedHistory(`ro-${platform}`, 'failed', 1);
      for (const [url, body] of POSTS) {
        const res = await request(ro.getHttpServer())
          .post(url.replace('/queues/', '/ro/'))
          .set(HDR)
          .send(JSON.stringify(url.includes('/jobs/') ? { ids: [id] } : body));
        expect([url, res.status]).toEqual([url, 403]);
        expect(res.body.error).toMatch(/read-only/);
      }
      expect((await request(ro.getHttpServer()).get('/ro/api/overview')).body.readOnly).toBe(true);
      expect((await request(ro.getHttpServer()).get('/ro')).text).toContain('<meta name="pgq-read-only" content="true">');
      const { rows } = await sql.query(`SELECT state FROM pgqueue.job_history WHERE id = $1`, [id]);
      expect(rows).toEqual([{ state: 'failed' }]);
    });

    it('authorize(req, action): false answers 403, with the action it was asked about', async () => {
      const asked: string[] = [];
      const au = await boot({
        path: '/au',
        authorize: (req, action) => {
          asked.push(`${req.method} ${action}`);
          return action === 'read' && req.headers['x-user'] === 'ops';
        },
      });
      const srv = () => request(au.getHttpServer());
      expect((await srv().get('/au/api/overview')).status).toBe(403);
      expect((await srv().get('/au')).status).toBe(403);
      expect((await srv().get('/au/api/overview').set('x-user', 'ops')).status).toBe(200);
      for (const [url, body] of POSTS) {
        const res = await srv().post(url.replace('/queues/', '/au/')).set(HDR).set('x-user', 'ops').send(JSON.stringify(body));
        expect([url, res.status]).toEqual([url, 403]);
      }
      expect(asked).toEqual(
        expect.arrayContaining([
          'GET read',
          'POST retry',
          'POST cancel',
          'POST remove',
          'POST pause',
          'POST resume',
          'POST enqueue',
        ]),
      );
    });

    it('guards run on the page, the assets and the API', async () => {
      const g = await boot({ path: '/g', guards: [DenyUnlessHeader] });
      const srv = () => request(g.getHttpServer());
      for (const url of ['/g', '/g/jobs/1', '/g/assets/app.js', '/g/api/overview', '/g/api/jobs/1', '/g/api/nodes']) {
        expect([url, (await srv().get(url)).status]).toEqual([url, 403]);
      }
      expect((await srv().post('/g/api/queues/q/pause').set(HDR).send('{}')).status).toBe(403);
      expect((await srv().get('/g/api/overview').set('x-test-auth', 'yes')).status).toBe(200);
      expect((await srv().get('/g').set('x-test-auth', 'yes')).status).toBe(200);
    });

    it('refuses to boot without guards, authorize or public: true, saying what to pass', async () => {
      expect(() => PgQueueDashboardModule.register({})).toThrow(PgQueueConfigError);
      expect(() => PgQueueDashboardModule.register({ guards: [] })).toThrow(
        /Pass guards: \[YourAuthGuard\].*authorize: \(req, action\) => boolean.*public: true/,
      );
      await expect(
        bootHttpApp(platform, {
          options: { connection: db.url, workers: false },
          imports: [PgQueueDashboardModule.registerAsync({ path: '/async', useFactory: async () => ({ readOnly: true }) })],
        }),
      ).rejects.toThrow(/serves nothing until you decide who may use it/);
      expect(() => PgQueueDashboardModule.register({ public: true, path: 'queues' })).toThrow(/path "queues" is not valid/);
    });

    it('API answers (errors included) carry Cache-Control: no-store and X-Content-Type-Options: nosniff', async () => {
      for (const url of ['/queues/api/overview', '/queues/api/nodes', '/queues/api/jobs/987654321', '/queues/api/jobs/x']) {
        const res = await http().get(url);
        expect([url, res.headers['cache-control'], res.headers['x-content-type-options']]).toEqual([url, 'no-store', 'nosniff']);
      }
      const action = await post(`/queues/api/queues/${Q}/pause`, { extra: 1 });
      expect([action.status, action.headers['cache-control'], action.headers['x-content-type-options']]).toEqual([
        400,
        'no-store',
        'nosniff',
      ]);
    });

    it('the mount path matches only as spelled: another case or a percent-encoded letter answers 404 and acts on nothing', async () => {
      const q = `path-${platform}`;
      for (const url of [
        '/Queues/api/overview',
        '/QUEUES',
        '/%71ueues/api/overview',
        '/queues/API/overview',
        '/queues/api/Nodes',
      ]) {
        expect([url, (await http().get(url)).status]).toEqual([url, 404]);
      }
      const res = await http().post(`/Queues/api/queues/${q}/pause`).set(HDR).send('{}');
      expect(res.status).toBe(404);
      const enc = await http().post(`/%71ueues/api/queues/${q}/pause`).set(HDR).send('{}');
      expect(enc.status).toBe(404);
      const { rows } = await sql.query(`SELECT 1 FROM pgqueue.queues WHERE name = $1 AND paused`, [q]);
      expect(rows).toEqual([]);
      expect((await http().get(`/queues/api/jobs/987654321`)).status).toBe(404);
    });

    it('an action from another site is refused (Sec-Fetch-Site, else Origin); same-origin and non-browser ones pass', async () => {
      const q = `site-${platform}`;
      const pause = (headers: Record<string, string>) =>
        http().post(`/queues/api/queues/${q}/pause`).set(HDR).set(headers).send('{}');
      const refused: Record<string, string>[] = [
        { 'Sec-Fetch-Site': 'cross-site' },
        { 'Sec-Fetch-Site': 'same-site' },
        { 'Sec-Fetch-Site': 'cross-site', Origin: 'http://127.0.0.1' },
        { Origin: 'https://evil.example' },
        { Origin: 'null' },
      ];
      for (const h of refused) {
        const res = await pause(h);
        expect([JSON.stringify(h), res.status]).toEqual([JSON.stringify(h), 403]);
        expect(res.body.error).toMatch(/refused from another site/);
      }
      expect((await sql.query(`SELECT 1 FROM pgqueue.queues WHERE name = $1 AND paused`, [q])).rows).toEqual([]);
      expect((await pause({ 'Sec-Fetch-Site': 'same-origin', Origin: 'https://whatever.example' })).status).toBe(200);
      expect((await pause({ Origin: 'http://dash.example:8080', Host: 'dash.example:8080' })).status).toBe(200);
      expect((await pause({})).status).toBe(200);
      // Reads are not actions: a cross-site GET is the browser's to refuse (CORS), not ours.
      expect((await http().get('/queues/api/overview').set('Sec-Fetch-Site', 'cross-site')).status).toBe(200);
    });

    it('a malformed cursor (an id past bigint, an impossible time) answers 400, never 500', async () => {
      const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      for (const [state, c] of [
        ['failed', { id: '9223372036854775808' }],
        ['failed', { id: '99999999999999999999999' }],
        ['waiting', { priority: 0, runAt: '2024-13-45T25:61:00.000000', id: '5' }],
        ['waiting', { priority: 0, runAt: '2024-02-30T00:00:00.000000', id: '5' }],
        ['delayed', { priority: 0, runAt: '2024-01-01T00:00:00.000000', id: '9223372036854775808' }],
      ] as const) {
        const res = await http().get(`/queues/api/queues/${Q}/jobs?state=${state}&before=${cursor(c)}`);
        expect([JSON.stringify(c), res.status]).toEqual([JSON.stringify(c), 400]);
        expect(res.body.error).toMatch(/Cursor "before" is not valid/);
      }
      const ok = cursor({ priority: 0, runAt: '2024-02-29T23:59:59.999999', id: '5' });
      expect((await http().get(`/queues/api/queues/${Q}/jobs?state=waiting&before=${ok}`)).status).toBe(200);
    });

    it('authorize gets a context: the queue, the queues of the ids, the connection, the filter; retry-all and bulk actions have their own names', async () => {
      const asked: {
        action: string;
        queue: string | null;
        queues: readonly string[];
        ids: readonly string[];
        connection: string | null;
        filter: unknown;
      }[] = [];
      const ctx = await boot({
        path: '/ctx',
        authorize: (_req, action, c) => {
          asked.push({ action, ...c });
          return !c.queues.includes(`secret-${platform}`);
        },
      });
      const srv = () => request(ctx.getHttpServer());
      const act = (url: string, body: unknown) => srv().post(url).set(HDR).send(JSON.stringify(body));
      const [mine] = await seedHistory(`open-${platform}`, 'failed', 1);
      const [other] = await seedHistory(`secret-${platform}`, 'failed', 1);
      const last = () => asked[asked.length - 1];

      expect((await srv().get(`/ctx/api/queues/${M}/jobs?state=failed&name=x`)).status).toBe(200);
      expect(last()).toMatchObject({
        action: 'read',
        queue: M,
        queues: [M],
        ids: [],
        connection: 'default',
        filter: { state: 'failed', name: 'x' },
      });
      expect((await srv().get(`/ctx/api/jobs/${mine}`)).status).toBe(200);
      expect(last()).toMatchObject({ action: 'read', queue: null, queues: [`open-${platform}`], ids: [mine], connection: null });
      // A job of a queue authorize refuses: its page, and an action naming it among others.
      expect((await srv().get(`/ctx/api/jobs/${other}`)).status).toBe(403);
      expect((await act('/ctx/api/jobs/retry', { ids: [mine, other] })).status).toBe(403);
      expect(last()).toMatchObject({
        action: 'retry-bulk',
        queues: [`open-${platform}`, `secret-${platform}`].sort(),
        ids: [mine, other],
      });
      expect((await sql.query(`SELECT state FROM pgqueue.job_history WHERE id = $1`, [other])).rows).toEqual([
        { state: 'failed' },
      ]);
      expect((await act('/ctx/api/jobs/retry', { ids: [mine] })).status).toBe(200);
      expect(last()).toMatchObject({ action: 'retry', ids: [mine] });
      expect((await act('/ctx/api/jobs/cancel', { ids: ['1', '2'] })).status).toBe(200);
      expect(last().action).toBe('cancel-bulk');
      expect((await act('/ctx/api/jobs/remove', { ids: ['1', '2'] })).status).toBe(200);
      expect(last().action).toBe('remove-bulk');
      expect((await act(`/ctx/api/queues/${M}/retry-failed`, { name: 'bill' })).status).toBe(200);
      expect(last()).toMatchObject({ action: 'retry-all', queue: M, queues: [M], filter: { name: 'bill' } });
      expect((await act(`/ctx/api/queues/secret-${platform}/retry-failed`, {})).status).toBe(403);
      expect((await sql.query(`SELECT state FROM pgqueue.job_history WHERE id = $1`, [other])).rows).toEqual([
        { state: 'failed' },
      ]);
      // Whole-dashboard reads touch no queue in particular.
      expect((await srv().get('/ctx/api/overview')).status).toBe(200);
      expect(last()).toEqual({ action: 'read', queue: null, queues: [], ids: [], connection: null, filter: null });
    });

    it('authorize can refuse retry-all and the bulk actions by their names alone; the one-job actions still pass', async () => {
      const ctx = await boot({
        path: '/bulk',
        authorize: (_req, action) => action !== 'retry-all' && !action.endsWith('-bulk'),
      });
      const act = (url: string, body: unknown) => request(ctx.getHttpServer()).post(url).set(HDR).send(JSON.stringify(body));
      const [a, b] = await seedHistory(M, 'failed', 2, { name: 'bulk-names' });
      const where = async (id: string) =>
        (
          await sql.query<{ place: string }>(
            `SELECT 'jobs:' || state AS place FROM pgqueue.jobs WHERE id = $1
             UNION ALL SELECT 'history:' || state FROM pgqueue.job_history WHERE id = $1`,
            [id],
          )
        ).rows.map((r) => r.place);

      expect((await act(`/bulk/api/queues/${M}/retry-failed`, { name: 'bulk-names' })).status).toBe(403);
      for (const kind of ['retry', 'cancel', 'remove']) {
        expect([kind, (await act(`/bulk/api/jobs/${kind}`, { ids: [a, b] })).status]).toEqual([kind, 403]);
      }
      expect([await where(a), await where(b)]).toEqual([['history:failed'], ['history:failed']]);

      expect((await act('/bulk/api/jobs/retry', { ids: [a] })).status).toBe(200);
      expect(await where(a)).toEqual(['jobs:waiting']);
      expect((await act('/bulk/api/jobs/cancel', { ids: [a] })).status).toBe(200);
      expect(await where(a)).toEqual(['history:cancelled']);
      expect((await act('/bulk/api/jobs/remove', { ids: [a] })).status).toBe(200);
      expect((await act('/bulk/api/jobs/remove', { ids: [b] })).status).toBe(200);
      expect([await where(a), await where(b)]).toEqual([[], []]);
    });

    it('warns at boot when the dashboard is public (no guards, no authorize), and only then', async () => {
      const warn = jest.spyOn(Logger.prototype, 'warn');
      try {
        await boot({ public: true, path: '/open' });
        expect(warn.mock.calls.map((c) => String(c[0]))).toEqual(
          expect.arrayContaining([expect.stringMatching(/The dashboard at \/open is public .* sees every job's payload/)]),
        );
        warn.mockClear();
        await boot({ path: '/closed', guards: [DenyUnlessHeader] });
        expect(warn.mock.calls.filter((c) => /dashboard at/.test(String(c[0])))).toEqual([]);
      } finally {
        warn.mockRestore();
      }
    });

    it('every read runs under statementTimeoutMs: one that waits past it answers 503 and the next read works', async () => {
      expect(() => PgQueueDashboardModule.register({ public: true, statementTimeoutMs: 50 })).toThrow(
        /statementTimeoutMs must be an integer from 100 to 600000/,
      );
      // Long enough for any read of this test's tables on a loaded machine, short for a lock wait.
      const st = await boot({ public: true, path: '/st', statementTimeoutMs: 1500 });
      const hold = await sql.connect();
      try {
        await hold.query('BEGIN');
        await hold.query('LOCK TABLE pgqueue.queues IN ACCESS EXCLUSIVE MODE');
        // A deadline of its own: without statement_timeout the read waits on the lock for ever,
        // and the test must fail (and release the lock below) rather than hang the file.
        const res = await request(st.getHttpServer()).get('/st/api/overview').timeout(20_000);
        expect(res.status).toBe(503);
        expect(res.body.error).toMatch(/ran past statementTimeoutMs \(1500 ms\)/);
      } finally {
        await hold.query('ROLLBACK');
        hold.release();
      }
      const after = await request(st.getHttpServer()).get('/st/api/overview');
      expect([after.status, after.body.error]).toEqual([200, undefined]);
    });

    it('registerAsync mounts with options from a factory', async () => {
      const app2 = await bootHttpApp(platform, {
        options: { connection: db.url, workers: false },
        imports: [
          PgQueueDashboardModule.registerAsync({
            path: '/admin/queues',
            useFactory: async () => ({ public: true, readOnly: true }),
          }),
        ],
      });
      apps.push(app2);
      const res = await request(app2.getHttpServer()).get('/admin/queues/api/overview');
      expect(res.status).toBe(200);
      expect(res.body.readOnly).toBe(true);
    });
  });
});
