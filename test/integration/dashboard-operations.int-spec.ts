import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import type { Pool } from 'pg';
import request from 'supertest';
import { PgQueueDashboardModule, type PgQueueDashboardOptions } from '../../lib/dashboard';
import { bootHttpApp, PLATFORMS, type Platform } from '../support/dashboard-app';
import { createTestDatabase, testPool, type TestDatabase } from '../support/database';

// The dashboard's operator routes (issue 27 point 8) over HTTP on real PostgreSQL, on Express and
// Fastify: the search box (id or unique key), the count a confirmation shows, clean by age, drain,
// promote; each POST under the access rules (custom header, readOnly, authorize's action names).
// Jobs are seeded with SQL so states and ages are exact; workers are off, so nothing moves unless
// a test moves it.

const HDR = { 'X-PgQueue-Dashboard': '1', 'Content-Type': 'application/json' };

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

/** Live jobs of `queue` (waiting, or delayed by `delayMs`): their ids. */
async function seedLive(queue: string, rows: { name?: string; uniqueKey?: string; delayMs?: number }[]): Promise<string[]> {
  const ids: string[] = [];
  for (const r of rows) {
    const {
      rows: [x],
    } = await sql.query<{ id: string }>(
      `INSERT INTO pgqueue.jobs (queue, name, payload, run_at, unique_key)
       VALUES ($1, $2, '{}', now() + $3 * interval '1 millisecond' - interval '1 second', $4) RETURNING id::text`,
      [queue, r.name ?? 'job', r.delayMs ?? 0, r.uniqueKey ?? null],
    );
    ids.push(x.id);
  }
  return ids;
}

let nextHistoryId = 5_000_000;
/** `n` finished jobs of `queue` in `state`, finished `ageMs` ago: their ids. */
async function seedHistory(
  queue: string,
  state: 'completed' | 'failed' | 'cancelled',
  n: number,
  o: { name?: string; ageMs?: number } = {},
): Promise<string[]> {
  const first = nextHistoryId;
  nextHistoryId += n;
  await sql.query(
    `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at)
     SELECT g, $2, $3, '{}', $4, 0, now(), 1, 1, '[]', now() - $6 * interval '1 millisecond', now() - $6 * interval '1 millisecond'
     FROM generate_series($1::bigint, $1::bigint + $5 - 1) g`,
    [first, queue, o.name ?? 'job', state, n, o.ageMs ?? 0],
  );
  return Array.from({ length: n }, (_, i) => String(first + i));
}

const liveCount = async (queue: string, where = 'true'): Promise<number> =>
  (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = $1 AND ${where}`, [queue])).rows[0]
    .n;
const historyCount = async (queue: string, state: string): Promise<number> =>
  (
    await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1 AND state = $2`, [
      queue,
      state,
    ])
  ).rows[0].n;
const storedCap = async (queue: string): Promise<number | null> =>
  (await sql.query<{ n: number | null }>(`SELECT global_concurrency AS n FROM pgqueue.queues WHERE name = $1`, [queue])).rows[0]
    ?.n ?? null;
/** A job scheduler 's1' of `queue`, due in an hour, that has made one job. */
const seedScheduler = (queue: string) =>
  sql.query(
    `INSERT INTO pgqueue.job_schedulers (queue, id, every_ms, job_name, payload, next_run_at, count)
     VALUES ($1, 's1', 60000, 'tick', '{"t":1}', now() + interval '1 hour', 1)`,
    [queue],
  );
/** The scheduler 's1' of `queue`: paused and count, or null when removed. */
const schedulerOf = async (queue: string): Promise<{ paused: boolean; count: number } | null> =>
  (await sql.query(`SELECT paused, count FROM pgqueue.job_schedulers WHERE queue = $1 AND id = 's1'`, [queue])).rows[0] ?? null;
const isDue = async (id: string): Promise<boolean> =>
  (await sql.query<{ due: boolean }>(`SELECT run_at <= now() AS due FROM pgqueue.jobs WHERE id = $1`, [id])).rows[0].due;

describe.each(PLATFORMS)('dashboard operator routes on %s', (platform: Platform) => {
  const apps: INestApplication[] = [];
  async function boot(dash: PgQueueDashboardOptions): Promise<INestApplication> {
    const app = await bootHttpApp(platform, {
      options: { connection: db.url, workers: false },
      queues: [{ name: `ops-${platform}` }, { name: `other-${platform}` }],
      imports: [PgQueueDashboardModule.register({ countsBudget: 1, ...dash })],
    });
    apps.push(app);
    return app;
  }
  afterAll(async () => {
    for (const a of apps) await a.close();
  });

  let app: INestApplication;
  const Q = `ops-${platform}`;
  const O = `other-${platform}`;
  const http = () => request(app.getHttpServer());
  const post = (url: string, body: unknown) => http().post(url).set(HDR).send(JSON.stringify(body));

  beforeAll(async () => {
    app = await boot({ public: true });
  });

  describe('search', () => {
    it('by id: the job, in whatever queue it is, and the search page is served', async () => {
      const [id] = await seedLive(O, [{ name: 'found-by-id' }]);
      const res = await http().get(`/queues/api/search?q=${id}`);
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.body).toEqual({
        query: id,
        jobs: [{ id, queue: O, name: 'found-by-id', state: 'waiting', connection: 'default', match: 'id' }],
      });
      const page = await http().get('/queues/search?q=1');
      expect(page.status).toBe(200);
      expect(page.text).toContain('<meta name="pgq-base" content="/queues">');
    });

    it('by unique key: the live job holding it, in a registered queue or one this app does not register', async () => {
      const [a] = await seedLive(Q, [{ name: 'invoice', uniqueKey: `invoice:7-${platform}`, delayMs: 3_600_000 }]);
      const [b] = await seedLive(`foreign-${platform}`, [{ name: 'sync', uniqueKey: `account:9-${platform}` }]);
      const one = await http().get(`/queues/api/search?q=${encodeURIComponent(`  invoice:7-${platform} `)}`);
      expect(one.body.jobs).toEqual([
        { id: a, queue: Q, name: 'invoice', state: 'delayed', connection: 'default', match: 'uniqueKey' },
      ]);
      const foreign = await http().get(`/queues/api/search?q=${encodeURIComponent(`account:9-${platform}`)}`);
      expect(foreign.body.jobs).toEqual([
        { id: b, queue: `foreign-${platform}`, name: 'sync', state: 'waiting', connection: 'default', match: 'uniqueKey' },
      ]);
    });

    it('a key made of digits finds both the job of that id and the job holding that key', async () => {
      const [target] = await seedLive(O, [{ name: 'by-id' }]);
      const [holder] = await seedLive(Q, [{ name: 'numeric-key', uniqueKey: target }]);
      const res = await http().get(`/queues/api/search?q=${target}`);
      const matches = (res.body.jobs as { id: string; match: string }[]).map((j) => `${j.match}:${j.id}`).sort();
      expect(matches).toEqual([`id:${target}`, `uniqueKey:${holder}`]);
    });

    it('nothing found: an empty list, not an error; a finished job no longer holds its key', async () => {
      const [id] = await seedLive(Q, [{ uniqueKey: `gone-${platform}` }]);
      await sql.query(`DELETE FROM pgqueue.jobs WHERE id = $1`, [id]);
      const res = await http().get(`/queues/api/search?q=${encodeURIComponent(`gone-${platform}`)}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ query: `gone-${platform}`, jobs: [] });
      expect((await http().get('/queues/api/search?q=9223372036854775807')).body.jobs).toEqual([]);
    });

    it('bad input answers 400 with what to send', async () => {
      for (const url of ['/queues/api/search', '/queues/api/search?q=%20%20', `/queues/api/search?q=${'x'.repeat(1001)}`]) {
        const res = await http().get(url);
        expect([url.slice(0, 40), res.status]).toEqual([url.slice(0, 40), 400]);
        expect(res.body.error).toMatch(/"q" must be a job id or a unique key/);
      }
      const extra = await http().get('/queues/api/search?q=1&queue=x');
      expect(extra.status).toBe(400);
      expect(extra.body.error).toMatch(/Unknown query parameter\(s\) queue; known: q/);
    });

    it('with authorize, only jobs of queues it lets the request read are answered', async () => {
      const key = `shared-${platform}`;
      const [mine] = await seedLive(Q, [{ uniqueKey: key }]);
      await seedLive(O, [{ uniqueKey: key }]);
      const asked: string[] = [];
      const scoped = await boot({
        path: '/scoped',
        authorize: (_req, action, c) => {
          asked.push(`${action}:${c.queues.join(',')}`);
          return c.queues.every((q) => q === Q);
        },
      });
      const res = await request(scoped.getHttpServer()).get(`/scoped/api/search?q=${key}`);
      expect(res.status).toBe(200);
      expect(res.body.jobs.map((j: { id: string }) => j.id)).toEqual([mine]);
      expect(asked).toContain(`read:${O}`);
    });
  });

  describe('count, clean by age', () => {
    it('counts a state of one name, and finished jobs older than an age; the count is what clean then removes', async () => {
      await seedHistory(Q, 'completed', 3, { name: 'report', ageMs: 7_200_000 });
      await seedHistory(Q, 'completed', 2, { name: 'report', ageMs: 0 });
      await seedHistory(Q, 'completed', 4, { name: 'other', ageMs: 7_200_000 });
      const all = await http().get(`/queues/api/queues/${Q}/count?state=completed`);
      expect(all.body).toEqual({ count: 9, atLeast: false });
      const named = await http().get(`/queues/api/queues/${Q}/count?state=completed&name=report`);
      expect(named.body.count).toBe(5);
      const old = await http().get(`/queues/api/queues/${Q}/count?state=completed&olderThanMs=3600000`);
      expect(old.body.count).toBe(7);

      const res = await post(`/queues/api/queues/${Q}/clean`, { state: 'completed', olderThanMs: 3_600_000 });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ removed: 7 });
      expect(await historyCount(Q, 'completed')).toBe(2);
      expect((await http().get(`/queues/api/queues/${Q}/count?state=completed&olderThanMs=3600000`)).body.count).toBe(0);
    });

    it('clean takes a limit; olderThanMs 0 takes every job of the state, and other states are left alone', async () => {
      await seedHistory(O, 'failed', 5);
      await seedHistory(O, 'cancelled', 2);
      expect((await post(`/queues/api/queues/${O}/clean`, { state: 'failed', olderThanMs: 0, limit: 3 })).body).toEqual({
        removed: 3,
      });
      expect((await post(`/queues/api/queues/${O}/clean`, { state: 'failed', olderThanMs: 0 })).body).toEqual({ removed: 2 });
      expect(await historyCount(O, 'cancelled')).toBe(2);
    });

    it('counts live states too: waiting and delayed apart, of one name', async () => {
      const q = `count-live-${platform}`;
      await seedLive(q, [{ name: 'a' }, { name: 'a' }, { name: 'b' }, { name: 'a', delayMs: 3_600_000 }]);
      const get = async (qs: string) => (await http().get(`/queues/api/queues/${q}/count?${qs}`)).body.count;
      expect(await get('state=waiting')).toBe(3);
      expect(await get('state=waiting&name=a')).toBe(2);
      expect(await get('state=delayed')).toBe(1);
      expect(await get('state=active')).toBe(0);
    });

    it('bad counts and cleans answer 400 and change nothing', async () => {
      await seedHistory(Q, 'failed', 1, { ageMs: 7_200_000 });
      const before = await historyCount(Q, 'failed');
      const counts: [string, RegExp][] = [
        ['state=paused', /Query parameter "state" must be one of waiting/],
        ['state=waiting&olderThanMs=10', /olderThanMs counts finished jobs only/],
        ['state=failed&olderThanMs=-1', /olderThanMs must be a whole number/],
        ['state=failed&limit=3', /Unknown query parameter\(s\) limit/],
      ];
      for (const [qs, msg] of counts) {
        const res = await http().get(`/queues/api/queues/${Q}/count?${qs}`);
        expect([qs, res.status]).toEqual([qs, 400]);
        expect(res.body.error).toMatch(msg);
      }
      const cleans: [unknown, RegExp][] = [
        [{ state: 'waiting', olderThanMs: 0 }, /"state" must be one of completed, failed, cancelled/],
        [{ state: 'failed' }, /"olderThanMs" must be a whole number/],
        [{ state: 'failed', olderThanMs: 0, limit: 0 }, /"limit" must be a whole number of at least 1/],
        [{ state: 'failed', olderThanMs: 0, grace: 1 }, /Unknown field\(s\) grace/],
      ];
      for (const [b, msg] of cleans) {
        const res = await post(`/queues/api/queues/${Q}/clean`, b);
        expect([b, res.status]).toEqual([b, 400]);
        expect(res.body.error).toMatch(msg);
      }
      expect(await historyCount(Q, 'failed')).toBe(before);
    });
  });

  describe('drain, promote', () => {
    it('drain removes every waiting and delayed job of the queue, not its history nor other queues', async () => {
      const q = `drain-${platform}`;
      await seedLive(q, [{}, {}, { delayMs: 3_600_000 }]);
      await seedHistory(q, 'completed', 2);
      const [kept] = await seedLive(O, [{}]);
      const res = await post(`/queues/api/queues/${q}/drain`, {});
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ removed: 3 });
      expect(await liveCount(q)).toBe(0);
      expect(await historyCount(q, 'completed')).toBe(2);
      expect(await liveCount(O, `id = ${Number(kept)}`)).toBe(1);
      expect((await post(`/queues/api/queues/${q}/drain`, { delayed: true })).status).toBe(400);
    });

    it('promote: the delayed jobs among the ids become due now; others are left as they are', async () => {
      const [delayed, due] = await seedLive(Q, [{ delayMs: 3_600_000 }, {}]);
      const [finished] = await seedHistory(Q, 'completed', 1);
      const res = await post('/queues/api/jobs/promote', { ids: [delayed, due, finished, '999999999'] });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ promoted: [delayed] });
      expect(await isDue(delayed)).toBe(true);
    });

    it('promote-all: every delayed job of one name (or all of them) becomes due; the count says how many', async () => {
      const q = `promote-${platform}`;
      const [r1, r2, other] = await seedLive(q, [
        { name: 'remind', delayMs: 3_600_000 },
        { name: 'remind', delayMs: 7_200_000 },
        { name: 'report', delayMs: 3_600_000 },
      ]);
      const named = await post(`/queues/api/queues/${q}/promote-all`, { name: 'remind' });
      expect(named.body).toEqual({ promoted: 2 });
      expect([await isDue(r1), await isDue(r2), await isDue(other)]).toEqual([true, true, false]);
      expect((await post(`/queues/api/queues/${q}/promote-all`, {})).body).toEqual({ promoted: 1 });
      expect(await isDue(other)).toBe(true);
      expect((await post(`/queues/api/queues/${q}/promote-all`, { name: 7 })).status).toBe(400);
    });
  });

  describe('actions over every job matching a state and name', () => {
    it('retry-matching runs again every completed (or failed, cancelled) job of a name; the count said how many', async () => {
      const q = `rm-retry-${platform}`;
      await seedHistory(q, 'completed', 3, { name: 'export' });
      await seedHistory(q, 'completed', 2, { name: 'other' });
      await seedHistory(q, 'failed', 1, { name: 'export' });
      const before = await http().get(`/queues/api/queues/${q}/count?state=completed&name=export`);
      expect(before.body.count).toBe(3);
      const res = await post(`/queues/api/queues/${q}/retry-matching`, { state: 'completed', name: 'export' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ retried: 3 });
      expect(await liveCount(q, `name = 'export' AND state = 'waiting'`)).toBe(3);
      expect(await historyCount(q, 'completed')).toBe(2);
      expect(await historyCount(q, 'failed')).toBe(1);
      expect((await post(`/queues/api/queues/${q}/retry-matching`, { state: 'failed' })).body).toEqual({ retried: 1 });
    });

    it('remove-matching removes every job of the state (live or finished), of one name if given', async () => {
      const q = `rm-remove-${platform}`;
      await seedLive(q, [{ name: 'a', delayMs: 3_600_000 }, { name: 'b', delayMs: 3_600_000 }, { name: 'a' }]);
      await seedHistory(q, 'failed', 4);
      expect((await post(`/queues/api/queues/${q}/remove-matching`, { state: 'delayed', name: 'a' })).body).toEqual({
        removed: 1,
      });
      expect(await liveCount(q)).toBe(2);
      expect((await post(`/queues/api/queues/${q}/remove-matching`, { state: 'failed' })).body).toEqual({ removed: 4 });
      expect(await historyCount(q, 'failed')).toBe(0);
    });

    it('cancel-matching cancels every waiting job of a name; they end cancelled in history', async () => {
      const q = `rm-cancel-${platform}`;
      await seedLive(q, [{ name: 'mail' }, { name: 'mail' }, { name: 'sms' }]);
      const res = await post(`/queues/api/queues/${q}/cancel-matching`, { state: 'waiting', name: 'mail' });
      expect(res.body).toEqual({ cancelled: 2 });
      expect(await historyCount(q, 'cancelled')).toBe(2);
      expect(await liveCount(q)).toBe(1);
    });

    it('a state the call does not take, or an unknown field, answers 400 and changes nothing', async () => {
      const q = `rm-bad-${platform}`;
      await seedLive(q, [{}]);
      await seedHistory(q, 'failed', 1);
      const bad: [string, unknown, RegExp][] = [
        ['retry', { state: 'waiting' }, /"state" of retry-matching must be one of completed, failed, cancelled/],
        ['remove', { state: 'active' }, /"state" of remove-matching must be one of waiting, delayed/],
        ['cancel', { state: 'failed' }, /"state" of cancel-matching must be one of waiting, delayed, waiting-children, active/],
        ['remove', {}, /"state" of remove-matching must be one of/],
        ['remove', { state: 'failed', ids: ['1'] }, /Unknown field\(s\) ids/],
        ['cancel', { state: 'waiting', name: 5 }, /"name" must be a job name/],
      ];
      for (const [action, b, msg] of bad) {
        const res = await post(`/queues/api/queues/${q}/${action}-matching`, b);
        expect([action, b, res.status]).toEqual([action, b, 400]);
        expect(res.body.error).toMatch(msg);
      }
      expect(await liveCount(q)).toBe(1);
      expect(await historyCount(q, 'failed')).toBe(1);
    });
  });

  describe('concurrency: per node and global (issue 28, point 4)', () => {
    it('shows each node of the queue with its concurrency, the option and the stored cap; sets and removes the cap', async () => {
      const q = `conc-${platform}`;
      // A node of the registry as its heartbeat writes it: one with a worker for the queue, one without.
      await sql.query(
        `INSERT INTO pgqueue.nodes (id, host, pid, started_at, heartbeat_ms, queues) VALUES
           ($1, 'h1', 11, now(), 60000, $2), ($3, 'h2', 12, now(), 60000, '[]')`,
        [`h1:11:${platform}`, JSON.stringify([{ name: q, concurrency: 4 }]), `h2:12:${platform}`],
      );
      const read = async () => (await http().get(`/queues/api/queues/${q}/concurrency`)).body;
      expect(await read()).toEqual({
        nodes: [{ id: `h1:11:${platform}`, host: 'h1', pid: 11, concurrency: 4 }],
        globalConcurrency: { option: null, stored: null },
      });
      const set = await post(`/queues/api/queues/${q}/global-concurrency`, { globalConcurrency: 3 });
      expect([set.status, set.body]).toEqual([200, { globalConcurrency: 3 }]);
      const stored = () => storedCap(q);
      expect(await stored()).toBe(3);
      expect((await read()).globalConcurrency).toEqual({ option: null, stored: 3 });
      for (const bad of [{ globalConcurrency: 0 }, { globalConcurrency: 2.5 }, { globalConcurrency: '3' }, {}, { n: 3 }]) {
        const res = await post(`/queues/api/queues/${q}/global-concurrency`, bad);
        expect([bad, res.status]).toEqual([bad, 400]);
      }
      expect(await stored()).toBe(3);
      const removed = await post(`/queues/api/queues/${q}/global-concurrency`, { globalConcurrency: null });
      expect([removed.status, removed.body]).toEqual([200, { globalConcurrency: null }]);
      expect(await stored()).toBeNull();
      await sql.query(`DELETE FROM pgqueue.nodes WHERE id LIKE $1`, [`%:${platform}`]);
    });
  });

  describe('job schedulers', () => {
    it('pause, resume, run now (a job due now, the schedule unmoved) and remove; an unknown one answers 404', async () => {
      const q = `sched-${platform}`;
      await seedScheduler(q);
      const next = async () =>
        (await sql.query(`SELECT next_run_at FROM pgqueue.job_schedulers WHERE queue = $1`, [q])).rows[0].next_run_at as Date;
      const before = await next();
      expect((await post(`/queues/api/queues/${q}/schedulers/s1/pause`, {})).body).toEqual({ done: true });
      expect(await schedulerOf(q)).toEqual({ paused: true, count: 1 });
      const listed = (await http().get('/queues/api/schedules')).body.schedules.find((s: { queue: string }) => s.queue === q);
      expect(listed).toMatchObject({ id: 's1', name: 'tick', every: 60000, paused: true, source: 'runtime' });
      expect((await post(`/queues/api/queues/${q}/schedulers/s1/resume`, {})).body).toEqual({ done: true });
      expect(await schedulerOf(q)).toEqual({ paused: false, count: 1 });
      const run = await post(`/queues/api/queues/${q}/schedulers/s1/run`, {});
      expect(run.status).toBe(200);
      const job = (
        await sql.query(`SELECT id::text, name, payload, run_at <= now() AS due FROM pgqueue.jobs WHERE queue = $1`, [q])
      ).rows;
      expect(job).toEqual([{ id: run.body.jobId, name: 'tick', payload: { t: 1 }, due: true }]);
      expect(await next()).toEqual(before);
      expect((await post(`/queues/api/queues/${q}/schedulers/nope/run`, {})).status).toBe(404);
      expect((await post(`/queues/api/queues/${q}/schedulers/s1/remove`, {})).body).toEqual({ done: true });
      expect(await schedulerOf(q)).toBeNull();
      expect((await post(`/queues/api/queues/${q}/schedulers/s1/remove`, {})).status).toBe(404);
    });
  });

  describe('access rules on every new POST', () => {
    const routes = (queue: string, id: string): [string, unknown][] => [
      [`/api/queues/${queue}/clean`, { state: 'completed', olderThanMs: 0 }],
      [`/api/queues/${queue}/drain`, {}],
      [`/api/queues/${queue}/promote-all`, {}],
      ['/api/jobs/promote', { ids: [id] }],
      [`/api/queues/${queue}/retry-matching`, { state: 'completed' }],
      [`/api/queues/${queue}/remove-matching`, { state: 'delayed' }],
      [`/api/queues/${queue}/cancel-matching`, { state: 'delayed' }],
      [`/api/queues/${queue}/global-concurrency`, { globalConcurrency: 1 }],
      [`/api/queues/${queue}/nodes/h1:1:ab/concurrency`, { concurrency: 2 }],
      [`/api/queues/${queue}/schedulers/s1/pause`, {}],
      [`/api/queues/${queue}/schedulers/s1/resume`, {}],
      [`/api/queues/${queue}/schedulers/s1/run`, {}],
      [`/api/queues/${queue}/schedulers/s1/remove`, {}],
    ];

    it('readOnly refuses each with 403 and changes nothing', async () => {
      const q = `ro-${platform}`;
      await seedScheduler(q);
      const [delayed] = await seedLive(q, [{ delayMs: 3_600_000 }]);
      await seedHistory(q, 'completed', 1);
      const ro = await boot({ public: true, readOnly: true, path: '/ro' });
      for (const [url, b] of routes(q, delayed)) {
        const res = await request(ro.getHttpServer()).post(`/ro${url}`).set(HDR).send(JSON.stringify(b));
        expect([url, res.status]).toEqual([url, 403]);
        expect(res.body.error).toMatch(/read-only/);
      }
      expect(await liveCount(q)).toBe(1);
      expect(await isDue(delayed)).toBe(false);
      expect(await historyCount(q, 'completed')).toBe(1);
      expect(await storedCap(q)).toBeNull();
      expect(await schedulerOf(q)).toEqual({ paused: false, count: 1 });
      // Reads still answer.
      expect((await request(ro.getHttpServer()).get(`/ro/api/queues/${q}/count?state=completed`)).body.count).toBe(1);
    });

    it('without the custom header each answers 400 and changes nothing', async () => {
      const q = `hdr-${platform}`;
      await seedScheduler(q);
      const [delayed] = await seedLive(q, [{ delayMs: 3_600_000 }]);
      await seedHistory(q, 'completed', 1);
      for (const [url, b] of routes(q, delayed)) {
        const res = await http().post(`/queues${url}`).set('Content-Type', 'application/json').send(JSON.stringify(b));
        expect([url, res.status]).toEqual([url, 400]);
        expect(res.body.error).toMatch(/X-PgQueue-Dashboard: 1/);
      }
      expect(await schedulerOf(q)).toEqual({ paused: false, count: 1 });
      expect(await liveCount(q)).toBe(1);
      expect(await isDue(delayed)).toBe(false);
      expect(await historyCount(q, 'completed')).toBe(1);
      expect(await storedCap(q)).toBeNull();
    });

    it('authorize is asked with each action name and what it touches, and a refusal changes nothing', async () => {
      const q = `authz-${platform}`;
      await seedScheduler(q);
      const [d1, d2] = await seedLive(q, [{ delayMs: 3_600_000 }, { delayMs: 3_600_000 }]);
      await seedHistory(q, 'completed', 1);
      const asked: { action: string; queues: readonly string[]; filter: unknown }[] = [];
      const guarded = await boot({
        path: '/authz',
        authorize: (_req, action, c) => {
          asked.push({ action, queues: c.queues, filter: c.filter });
          return action === 'read';
        },
      });
      const send = (url: string, b: unknown) =>
        request(guarded.getHttpServer()).post(`/authz${url}`).set(HDR).send(JSON.stringify(b));
      for (const [url, b] of [
        ...routes(q, d1),
        ['/api/jobs/promote', { ids: [d1, d2] }] as [string, unknown],
        [`/api/queues/${q}/promote-all`, { name: 'job' }] as [string, unknown],
      ]) {
        expect([url, (await send(url, b)).status]).toEqual([url, 403]);
      }
      expect(asked.map((a) => a.action)).toEqual([
        'clean',
        'drain',
        'promote-all',
        'promote',
        'retry-matching',
        'remove-matching',
        'cancel-matching',
        'global-concurrency',
        'concurrency',
        'scheduler-pause',
        'scheduler-resume',
        'scheduler-run',
        'scheduler-remove',
        'promote-bulk',
        'promote-all',
      ]);
      expect(asked[0]).toEqual({ action: 'clean', queues: [q], filter: { state: 'completed', olderThanMs: '0' } });
      expect(asked[3].queues).toEqual([q]);
      expect(asked[4]).toEqual({ action: 'retry-matching', queues: [q], filter: { state: 'completed' } });
      expect(asked[14].filter).toEqual({ name: 'job' });
      expect(asked[7].queues).toEqual([q]);
      expect(asked[9].queues).toEqual([q]);
      expect(await schedulerOf(q)).toEqual({ paused: false, count: 1 });
      expect(await liveCount(q)).toBe(2);
      expect(await isDue(d1)).toBe(false);
      expect(await historyCount(q, 'completed')).toBe(1);
      expect(await storedCap(q)).toBeNull();
      // A count is a read of the queue, with its filter.
      asked.length = 0;
      await request(guarded.getHttpServer()).get(`/authz/api/queues/${q}/count?state=failed&name=x`);
      expect(asked).toEqual([{ action: 'read', queues: [q], filter: { state: 'failed', name: 'x' } }]);
    });
  });
});
