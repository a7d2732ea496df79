import 'reflect-metadata';
import {
  Injectable,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type INestApplicationContext,
} from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import request from 'supertest';
import { PgQueueConfigError, QueueService, type Queue } from '../../lib';
import { PgQueueDashboardModule, type PgQueueDashboardOptions } from '../../lib/dashboard';
import type { ListState } from '../../lib/core/dashboard-reads';
import { buildJobList } from '../../lib/db/dashboard-queries';
import { GROUP_SCAN_LIMIT, groupCountsSql } from '../../lib/db/group-counts';
import { PgQueueHealthIndicator } from '../../lib/health';
import { PgQueueMetricsModule } from '../../lib/metrics';
import { bootApp } from '../support/app';
import { bootHttpApp, PLATFORMS, type Platform } from '../support/dashboard-app';
import { useTestDatabase } from '../support/database';

// Issue 29 point 6: a queue's groups shown and measured. Jobs are put into groups with SQL (the
// group_key column of migration 17), so these tests need nothing of the grouped claim; workers
// are off, so nothing moves unless a test moves it.

const t = useTestDatabase();

/** Jobs of `queue` in `group` (null: none): `n` due ones `ageS` seconds old, or active ones, or delayed. */
async function seed(queue: string, group: string | null, n: number, o: { ageS?: number; state?: 'active' | 'delayed' } = {}) {
  const active = o.state === 'active';
  await t.pool.query(
    `INSERT INTO pgqueue.jobs (queue, name, payload, group_key, state, run_at, locked_until, locked_by)
     SELECT $1, 'job', '{}', $2, $3, now() - $4 * interval '1 second' + CASE WHEN $5 THEN interval '1 hour' ELSE interval '0' END,
            CASE WHEN $3 = 'active' THEN now() + interval '1 hour' END, CASE WHEN $3 = 'active' THEN 'node-a' END
     FROM generate_series(1, $6)`,
    [queue, group, active ? 'active' : 'waiting', o.ageS ?? 1, o.state === 'delayed', n],
  );
}

describe('getGroupCounts: the busiest groups of a queue, from bounded scans', () => {
  let app: INestApplicationContext;
  let queues: QueueService;
  let tenants: Queue;
  beforeAll(async () => {
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'tenants' }, { name: 'flood' }] });
    queues = app.get(QueueService);
    tenants = queues.getQueue('tenants');
    await seed('tenants', 'a', 5, { ageS: 10 });
    await seed('tenants', 'a', 1, { state: 'active' });
    await seed('tenants', 'b', 3, { ageS: 5 });
    await seed('tenants', 'b', 2, { state: 'active' });
    await seed('tenants', 'c', 1, { ageS: 60 });
    await seed('tenants', 'd', 1, { state: 'active' });
    await seed('tenants', 'e', 2, { state: 'delayed' }); // not due: not waiting, so not listed
    await seed('tenants', null, 4, { ageS: 120 }); // ungrouped: scanned, never a group
    await seed('other', 'a', 7); // another queue's group of the same name
  });
  afterAll(() => app?.close());

  it('lists the top groups by running + waiting with their oldest waiting age, and sums the rest', async () => {
    const r = await tenants.getGroupCounts({ top: 2 });
    expect(r.groups.map(({ oldestWaitingAgeMs: _, ...g }) => g)).toEqual([
      { group: 'a', waiting: 5, active: 1 },
      { group: 'b', waiting: 3, active: 2 },
    ]);
    expect(r.groups[0].oldestWaitingAgeMs).toBeGreaterThanOrEqual(10_000);
    expect(r.groups[0].oldestWaitingAgeMs).toBeLessThan(60_000);
    expect(r.other).toEqual({ groups: 2, waiting: 1, active: 1 });
    expect(r.complete).toBe(true);
    expect(r.scanned).toEqual({ waiting: 13, active: 4 });
    expect(r.queue).toBe('tenants');

    const all = await queues.getGroupCounts('tenants');
    expect(all.groups.map((g) => g.group)).toEqual(['a', 'b', 'c', 'd']);
    expect(all.groups.find((g) => g.group === 'd')).toEqual({ group: 'd', waiting: 0, active: 1, oldestWaitingAgeMs: null });
    expect(all.other).toEqual({ groups: 0, waiting: 0, active: 0 });
  });

  it("orderBy 'oldest' lists first the group whose oldest due job has waited longest", async () => {
    const r = await tenants.getGroupCounts({ top: 2, orderBy: 'oldest' });
    expect(r.groups.map((g) => g.group)).toEqual(['c', 'a']);
    expect(r.groups[0].oldestWaitingAgeMs).toBeGreaterThanOrEqual(60_000);
  });

  it('a queue without grouped jobs (or without jobs) answers no group', async () => {
    await seed('plain', null, 3);
    for (const q of ['plain', 'nothing-here']) {
      const r = await queues.getGroupCounts(q);
      expect([q, r.groups, r.other.groups, r.complete]).toEqual([q, [], 0, true]);
    }
  });

  it('refuses a bad top or orderBy, saying what to pass', async () => {
    await expect(tenants.getGroupCounts({ top: 0 })).rejects.toThrow(PgQueueConfigError);
    await expect(tenants.getGroupCounts({ top: 1001 })).rejects.toThrow(/top must be a whole number from 1 to 1000/);
    await expect(tenants.getGroupCounts({ orderBy: 'newest' as 'oldest' })).rejects.toThrow(
      /orderBy must be 'busiest' or 'oldest'/,
    );
  });

  it('is bounded: past GROUP_SCAN_LIMIT due jobs it counts the first ones in claim order, says so, and still finds the oldest group', async () => {
    await seed('flood', 'starved', 1, { ageS: 600 }); // the oldest due job of the queue
    await seed('flood', 'big', GROUP_SCAN_LIMIT + 500, { ageS: 30 });
    for (let i = 0; i < 30; i++) await seed('flood', `small-${i}`, 2, { ageS: 20 }); // behind the flood in claim order
    const r = await queues.getGroupCounts('flood', { top: 5, orderBy: 'oldest' });
    expect(r.complete).toBe(false);
    expect(r.scanned.waiting).toBe(GROUP_SCAN_LIMIT);
    expect(r.groups[0]).toMatchObject({ group: 'starved', waiting: 1 });
    expect(r.groups[0].oldestWaitingAgeMs).toBeGreaterThanOrEqual(600_000);
    const busiest = await queues.getGroupCounts('flood', { top: 5 });
    expect(busiest.groups[0]).toEqual(expect.objectContaining({ group: 'big', waiting: GROUP_SCAN_LIMIT - 1 }));

    // The plan: each scan under its LIMIT, on the claim's and the active jobs' indexes, never a
    // sequential scan of jobs. Printed for the record (docs/health-and-metrics.md#groups).
    const { rows } = await t.pool.query<{ 'QUERY PLAN': unknown }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${groupCountsSql('pgqueue').replace(/\$1/g, `'flood'`).replace(/\$2/g, String(GROUP_SCAN_LIMIT)).replace(/\$3/g, '5').replace(/\$4/g, `'busiest'`)}`,
    );
    const plan = JSON.stringify(rows[0]['QUERY PLAN']);
    expect(plan).toContain('"Index Name":"jobs_claim_idx"');
    expect(plan).toContain('"Index Name":"jobs_active_idx"');
    expect(plan).not.toContain('"Node Type":"Seq Scan"');
    const top = (
      rows[0]['QUERY PLAN'] as { 'Execution Time': number; Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }[]
    )[0];
    process.stdout.write(
      `group counts over ${GROUP_SCAN_LIMIT + 560} due jobs: ${top['Execution Time'].toFixed(1)} ms, ` +
        `${top.Plan['Shared Hit Blocks'] + top.Plan['Shared Read Blocks']} buffers\n`,
    );
  });
});

class DenyUnlessHeader implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    return ctx.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-test-auth'] === 'yes';
  }
}
Injectable()(DenyUnlessHeader);

describe.each(PLATFORMS)('dashboard: GET api/queues/:queue/groups on %s', (platform: Platform) => {
  const apps: INestApplication[] = [];
  async function boot(dash: PgQueueDashboardOptions): Promise<INestApplication> {
    const app = await bootHttpApp(platform, {
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'tenants' }],
      imports: [PgQueueDashboardModule.register({ countsBudget: 1, ...dash })],
    });
    apps.push(app);
    return app;
  }
  afterAll(async () => {
    for (const a of apps) await a.close();
  });

  it('answers the 20 busiest groups, the rest summed, with the connection and whether the scan saw every job', async () => {
    const app = await boot({ public: true });
    await seed(`web-${platform}`, null, 2);
    for (let i = 0; i < 25; i++) await seed(`web-${platform}`, `t-${String(i).padStart(2, '0')}`, i + 1, { ageS: 5 });
    const res = await request(app.getHttpServer()).get(`/queues/api/queues/web-${platform}/groups`);
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toMatchObject({ queue: `web-${platform}`, connection: 'default', top: 20, complete: true });
    expect(res.body.groups).toHaveLength(20);
    expect(res.body.groups[0]).toEqual({ group: 't-24', waiting: 25, active: 0, oldestWaitingAgeMs: expect.any(Number) });
    expect(res.body.other).toEqual({ groups: 5, waiting: 1 + 2 + 3 + 4 + 5, active: 0 });
    expect(res.body.scanned).toEqual({ waiting: 2 + (25 * 26) / 2, active: 0 });
    // A queue without groups: none, so the page shows no panel.
    const none = await request(app.getHttpServer()).get(`/queues/api/queues/nothing/groups`);
    expect([none.status, none.body.groups, none.body.other.groups]).toEqual([200, [], 0]);
    expect((await request(app.getHttpServer()).get('/queues/api/queues/%20bad/groups')).status).toBe(400);
  });

  it('GET api/queues/:queue/jobs?group= lists one group in every state, the live ones from the group indexes', async () => {
    const app = await boot({ public: true });
    const q = `list-${platform}`;
    await seed(q, 'ga', 3);
    await seed(q, 'gb', 2);
    await seed(q, null, 2);
    await seed(q, 'ga', 1, { state: 'active' });
    await seed(q, 'ga', 1, { state: 'delayed' });
    await t.pool.query(
      `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                        created_at, started_at, finished_at, group_key)
       SELECT nextval('pgqueue.jobs_id_seq'), $1, 'job', '{}', 'completed', 0, now(), 1, 3, '[]', now(), now(), now(), g
       FROM unnest(ARRAY['ga', 'gb', 'gb']) g`,
      [q],
    );
    const list = async (state: string, group?: string) => {
      const res = await request(app.getHttpServer())
        .get(`/queues/api/queues/${q}/jobs`)
        .query({ state, ...(group === undefined ? {} : { group }) });
      expect(res.status).toBe(200);
      return (res.body.jobs as { group: string | null }[]).map((j) => j.group);
    };
    expect(await list('waiting', 'ga')).toEqual(['ga', 'ga', 'ga']);
    expect(await list('waiting', 'gb')).toEqual(['gb', 'gb']);
    expect((await list('waiting')).sort()).toEqual(['ga', 'ga', 'ga', 'gb', 'gb', null, null].sort());
    expect(await list('active', 'ga')).toEqual(['ga']);
    expect(await list('active', 'gb')).toEqual([]);
    expect(await list('delayed', 'ga')).toEqual(['ga']);
    expect(await list('completed', 'gb')).toEqual(['gb', 'gb']);
    expect(await list('completed', 'ga')).toEqual(['ga']);
    expect(await list('waiting', 'nobody')).toEqual([]);
    const tooLong = await request(app.getHttpServer())
      .get(`/queues/api/queues/${q}/jobs`)
      .query({ state: 'waiting', group: 'x'.repeat(201) });
    expect(tooLong.status).toBe(400);
    expect(JSON.stringify(tooLong.body)).toMatch(/group must be at most 200 characters/);

    // The waiting states' group filter uses the grouped waiting jobs' index (its predicate
    // matches); the active one walks the queue's active rows (as many as jobs running).
    const plan = async (state: ListState): Promise<string> => {
      const { text, values } = buildJobList('pgqueue', state, { queue: q, cursor: null, filters: { group: 'ga' }, limit: 50 });
      const c = await t.pool.connect();
      try {
        await c.query('SET enable_seqscan = off');
        return (await c.query(`EXPLAIN ${text}`, values)).rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      } finally {
        await c.query('RESET enable_seqscan');
        c.release();
      }
    };
    expect(await plan('waiting')).toMatch(/jobs_group_claim_idx/);
    expect(await plan('active')).toMatch(/jobs_active_idx/);
  });

  it('is guarded like the other reads: the guards, then authorize with the queue; readOnly still reads', async () => {
    const g = await boot({ path: '/g', guards: [DenyUnlessHeader] });
    expect((await request(g.getHttpServer()).get('/g/api/queues/tenants/groups')).status).toBe(403);
    expect((await request(g.getHttpServer()).get('/g/api/queues/tenants/groups').set('x-test-auth', 'yes')).status).toBe(200);

    const asked: unknown[] = [];
    const au = await boot({
      path: '/au',
      authorize: (_req, action, ctx) => {
        asked.push([action, ctx.queue, ctx.queues]);
        return ctx.queue !== 'secret';
      },
    });
    expect((await request(au.getHttpServer()).get('/au/api/queues/secret/groups')).status).toBe(403);
    expect((await request(au.getHttpServer()).get('/au/api/queues/tenants/groups')).status).toBe(200);
    expect(asked).toEqual([
      ['read', 'secret', ['secret']],
      ['read', 'tenants', ['tenants']],
    ]);

    const ro = await boot({ path: '/ro', public: true, readOnly: true });
    expect((await request(ro.getHttpServer()).get('/ro/api/queues/tenants/groups')).status).toBe(200);
  });
});

type Scrape = MetricObjectWithValues<MetricValue<string>>[];

describe('metrics: per-group gauges with bounded label cardinality', () => {
  it('1,000 groups give at most top + 1 groups per queue: the top ones and __other__', async () => {
    const registry = new Registry();
    const off = new Registry();
    const app = await bootApp({
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'metered' }],
      imports: [PgQueueMetricsModule.register({ registry, groups: { top: 5 } })],
    });
    const app2 = await bootApp({
      options: { connection: t.db.url, workers: false },
      imports: [PgQueueMetricsModule.register({ registry: off, groups: false })],
    });
    try {
      // 1,000 groups of 1 to 3 due jobs each, and a flood group of 500.
      await t.pool.query(
        `INSERT INTO pgqueue.jobs (queue, name, payload, group_key, run_at)
         SELECT 'metered', 'job', '{}', 'tenant-' || (g % 1000), now() - interval '1 second' FROM generate_series(1, 2500) g`,
      );
      await seed('metered', 'flood', 500, { ageS: 30 });
      await seed('metered', 'flood', 3, { state: 'active' });
      const scrape = (await registry.getMetricsAsJSON()) as Scrape;
      const jobs = scrape.find((m) => m.name === 'pgqueue_group_jobs')!.values.filter((v) => v.labels.queue === 'metered');
      const groups = new Set(jobs.map((v) => v.labels.group));
      expect(groups.size).toBe(6);
      expect(groups).toContain('__other__');
      expect(jobs).toContainEqual(
        expect.objectContaining({ labels: { queue: 'metered', group: 'flood', state: 'waiting' }, value: 500 }),
      );
      expect(jobs).toContainEqual(
        expect.objectContaining({ labels: { queue: 'metered', group: 'flood', state: 'active' }, value: 3 }),
      );
      const other = jobs.find((v) => v.labels.group === '__other__' && v.labels.state === 'waiting')!;
      const listedWaiting = jobs.filter((v) => v.labels.state === 'waiting').reduce((a, v) => a + v.value, 0);
      expect(listedWaiting).toBe(2500 + 500);
      expect(other.value).toBeGreaterThan(0);
      const oldest = scrape
        .find((m) => m.name === 'pgqueue_group_oldest_waiting_seconds')!
        .values.filter((v) => v.labels.queue === 'metered');
      expect(oldest.length).toBeLessThanOrEqual(5);
      expect(oldest.find((v) => v.labels.group === 'flood')!.value).toBeGreaterThanOrEqual(30);

      const none = ((await off.getMetricsAsJSON()) as Scrape).filter((m) => m.name.startsWith('pgqueue_group_'));
      expect(none).toEqual([]);
    } finally {
      await app.close();
      await app2.close();
    }
  });

  it('refuses a bad groups option when the module is declared', () => {
    expect(() => PgQueueMetricsModule.register({ groups: { top: 0 } })).toThrow(PgQueueConfigError);
    expect(() => PgQueueMetricsModule.register({ groups: { top: 101 } })).toThrow(/groups must be \{ top: n \}/);
  });
});

describe('health: maxGroupWaitMs names the group that waited too long', () => {
  it('is down naming the starved group; up under a looser limit; reads no group while the queue is fresh', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'health-q' }],
      imports: [TerminusModule],
      providers: [PgQueueHealthIndicator],
    });
    try {
      await seed('health-q', 'flood', 50, { ageS: 5 });
      await seed('health-q', 'starved', 1, { ageS: 300 });
      const health = app.get(PgQueueHealthIndicator);
      const reads = jest.spyOn(app.get(QueueService), 'getGroupCounts');
      const down = await health.isHealthy('pgqueue', { queues: { 'health-q': { maxGroupWaitMs: 60_000 } } });
      expect(down.pgqueue.status).toBe('down');
      expect(down.pgqueue.problems).toEqual([
        expect.stringMatching(
          /^queue "health-q" group "starved": oldest available job waiting \d+ ms > queues\["health-q"\]\.maxGroupWaitMs 60000$/,
        ),
      ]);
      expect(down.pgqueue.queues['health-q'].groups).toEqual({
        starved: { available: 1, active: 0, oldestAvailableAgeMs: expect.any(Number) },
      });
      expect(reads.mock.calls).toEqual([['health-q', { top: 10, orderBy: 'oldest' }]]);
      reads.mockClear();
      // Every queue's oldest available job is younger than an hour: no group is read.
      const up = await health.isHealthy('pgqueue', { maxGroupWaitMs: 3_600_000 });
      expect(up.pgqueue.status).toBe('up');
      expect(up.pgqueue.queues['health-q']).not.toHaveProperty('groups');
      expect(reads).not.toHaveBeenCalled();
    } finally {
      await app.close();
    }
  });
});
