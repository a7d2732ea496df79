import 'reflect-metadata';
import { Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TerminusModule } from '@nestjs/terminus';
import type { Pool } from 'pg';
import { Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import request from 'supertest';
import { PgQueueModule, Process, Processor, QueueService, type Job } from '../../lib';
import { PgQueueTester, PgQueueTestingModule } from '../../lib/testing';
import { PgQueueDashboardModule } from '../../lib/dashboard';
import { PgQueueHealthIndicator } from '../../lib/health';
import { PgQueueMetricsModule } from '../../lib/metrics';
import { runtimeOf } from '../support/app';
import { bootHttpApp } from '../support/dashboard-app';
import { createTestDatabase, testPool, useTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { pooledOptions } from '../support/pgbouncer';

// What reads the queues sees every connection: counts, health, metrics, the dashboard, and the
// cron schedules (elected and ticked in each queue's own database). Two databases of the test
// server ("default" and "bulk") keep this cheap.

@Processor('app')
class AppProcessor {
  @Process()
  run() {
    return 'app done';
  }
}

@Processor('bulk')
class BulkProcessor {
  @Process()
  run(job: Job) {
    return `bulk ${job.name}`;
  }
}

type Scrape = MetricObjectWithValues<MetricValue<string>>[];
const sampleOf = (scrape: Scrape, metric: string, labels: Record<string, string>): number =>
  (scrape.find((m) => m.name === metric)?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, want]) => (v.labels as Record<string, unknown>)[k] === want))
    .reduce((a, v) => a + v.value, 0);

describe('counts, health, metrics, dashboard and cron over two databases', () => {
  const t = useTestDatabase();
  let bulkDb: TestDatabase;
  let bulkPool: Pool;
  let app: INestApplication;
  const registry = new Registry();
  const http = () => request(app.getHttpServer());

  beforeAll(async () => {
    bulkDb = await createTestDatabase();
    bulkPool = testPool(bulkDb.url, 2);
    app = await bootHttpApp('express', {
      options: pooledOptions({ connection: t.db.url, pollIntervalMs: 200, connections: { bulk: { connection: bulkDb.url } } }),
      queues: [
        { name: 'app' },
        // Every second: the tick must be enqueued into the bulk database, elected there.
        { name: 'bulk', connection: 'bulk', repeat: [{ name: 'tick', cron: '* * * * * *' }] },
      ],
      imports: [
        TerminusModule,
        PgQueueMetricsModule.register({ registry }),
        PgQueueDashboardModule.register({ path: '/q', public: true }),
      ],
      providers: [AppProcessor, BulkProcessor, PgQueueHealthIndicator],
    });
  });
  afterAll(async () => {
    await app?.close();
    await bulkPool?.end();
    await bulkDb?.drop();
  });

  it('a cron schedule of a queue on the bulk connection ticks into the bulk database, and its jobs run there', async () => {
    await waitFor(
      async () =>
        (await bulkPool.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'bulk' AND name = 'tick'`))
          .rows[0].n >= 1,
      { timeoutMs: 20_000, message: 'a tick job to complete in the bulk database' },
    );
    expect(
      (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'bulk'`)).rows[0].n +
        (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'bulk'`)).rows[0].n,
    ).toBe(0);
  });

  it('getCounts, health and metrics cover the queues of both connections', async () => {
    const queues = app.get(QueueService);
    await queues.getQueue('app').pause();
    await queues.getQueue('bulk').pause();
    try {
      await queues.addBulk('app', [{ name: 'a', payload: {} }]);
      await queues.addBulk('bulk', [
        { name: 'b', payload: {} },
        { name: 'b', payload: {} },
      ]);
      const counts = await queues.getCounts();
      expect(counts.app.waiting).toBe(1);
      expect(counts.bulk.waiting).toBeGreaterThanOrEqual(2); // ticks may wait too while paused
      const health = await app.get(PgQueueHealthIndicator).isHealthy('pgqueue', { queues: { bulk: { maxAvailable: 1 } } });
      expect(health.pgqueue.status).toBe('down');
      expect(JSON.stringify(health.pgqueue.problems)).toMatch(/bulk/);
      const scrape = (await registry.getMetricsAsJSON()) as Scrape;
      expect(sampleOf(scrape, 'pgqueue_queue_jobs', { queue: 'app', state: 'waiting' })).toBe(1);
      expect(sampleOf(scrape, 'pgqueue_queue_jobs', { queue: 'bulk', state: 'waiting' })).toBeGreaterThanOrEqual(2);
    } finally {
      await queues.getQueue('app').resume();
      await queues.getQueue('bulk').resume();
    }
    await waitFor(
      async () => {
        const scrape = (await registry.getMetricsAsJSON()) as Scrape;
        return (
          sampleOf(scrape, 'pgqueue_jobs_completed_total', { queue: 'app' }) >= 1 &&
          sampleOf(scrape, 'pgqueue_jobs_completed_total', { queue: 'bulk', name: 'b' }) === 2
        );
      },
      { timeoutMs: 20_000, message: 'completed counters of both queues' },
    );
  });

  it('the dashboard lists the queues of every connection, with their connection, and finds a job in its own database', async () => {
    const queues = app.get(QueueService);
    const overview = (await http().get('/q/api/overview').expect(200)).body as {
      connections: string[];
      queues: { name: string; connection: string }[];
    };
    expect(overview.connections).toEqual(['default', 'bulk']);
    expect(overview.queues.map((q) => [q.name, q.connection]).sort()).toEqual([
      ['app', 'default'],
      ['bulk', 'bulk'],
    ]);
    expect((await http().get('/q/api/queues/bulk').expect(200)).body.connection).toBe('bulk');

    // Ids are per database: make both databases hold a job with the same id. The bulk queue's
    // every-second cron may take an id of its sequence at any moment, so the bulk job is added
    // first and the app database's sequence (no cron there) is set from the id it got.
    await bulkPool.query(`SELECT setval(pg_get_serial_sequence('pgqueue.jobs', 'id'), 100000)`);
    const [onBulk] = await queues.addBulk('bulk', [{ name: 'same-id-bulk', payload: {} }]);
    await t.pool.query(`SELECT setval(pg_get_serial_sequence('pgqueue.jobs', 'id'), $1::bigint - 1)`, [onBulk.id]);
    const [onApp] = await queues.addBulk('app', [{ name: 'same-id-app', payload: {} }]);
    expect(onBulk.id).toBe(onApp.id);
    const inBulk = (await http().get(`/q/api/jobs/${onBulk.id}?connection=bulk`).expect(200)).body;
    expect([inBulk.job.name, inBulk.connection]).toEqual(['same-id-bulk', 'bulk']);
    const inDefault = (await http().get(`/q/api/jobs/${onApp.id}`).expect(200)).body;
    expect([inDefault.job.name, inDefault.connection]).toEqual(['same-id-app', 'default']);
    await http().get(`/q/api/jobs/${onApp.id}?connection=nope`).expect(400);
    // The schedule and this node show under the bulk connection too.
    const schedules = (await http().get('/q/api/schedules').expect(200)).body.schedules as {
      queue: string;
      connection: string;
    }[];
    expect(schedules.filter((s) => s.queue === 'bulk').map((s) => s.connection)).toContain('bulk');
    const nodes = (await http().get('/q/api/nodes').expect(200)).body.nodes as { connection: string }[];
    expect(new Set(nodes.map((n) => n.connection))).toEqual(new Set(['default', 'bulk']));
  });
});

// Below, each test builds its own module (not routed through PgBouncer by test/support: the
// first one needs manual mode, the second one a listener URL that stays unreachable).
describe('PgQueueTester and health over two databases', () => {
  const t = useTestDatabase();
  let bulkDb: TestDatabase;
  beforeAll(async () => {
    bulkDb = await createTestDatabase();
  });
  afterAll(async () => {
    await bulkDb?.drop();
  });

  it("drains the queues of every connection in manual mode, each in its own database's store", async () => {
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: t.db.url, connections: { bulk: { connection: bulkDb.url } } }),
        PgQueueModule.registerQueue({ name: 'app' }, { name: 'bulk', connection: 'bulk' }),
      ],
      providers: [AppProcessor, BulkProcessor],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      const tester = app.get(PgQueueTester);
      const queues = app.get(QueueService);
      await queues.add('app', 'a', {});
      await queues.add('bulk', 'later', {}, { delayMs: 3_600_000 });
      expect(await tester.allCounts()).toMatchObject({ app: { waiting: 1 }, bulk: { delayed: 1 } });
      const outcomes = await tester.drain({ makeDue: true });
      expect(outcomes.map((o) => [o.job.queue, o.event, o.event === 'completed' ? o.result : null]).sort()).toEqual([
        ['app', 'completed', 'app done'],
        ['bulk', 'completed', 'bulk later'],
      ]);
    } finally {
      await app.close();
    }
  });

  it('health names the connection whose listener is down, in the details and in the problem', async () => {
    // The bulk database's listener points at a port that refuses connections (port 1).
    @Module({
      imports: [
        TerminusModule,
        PgQueueModule.forRoot({
          connection: t.db.url,
          connections: { bulk: { connection: bulkDb.url, listenConnection: 'postgres://postgres@127.0.0.1:1/none' } },
        }),
        PgQueueModule.registerQueue({ name: 'app' }, { name: 'bulk', connection: 'bulk' }),
      ],
      providers: [AppProcessor, BulkProcessor, PgQueueHealthIndicator],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      await waitFor(() => runtimeOf(app).connections[0].supervisor.listenerState?.connected === true, {
        message: "the default connection's listener to connect",
      });
      const health = await app.get(PgQueueHealthIndicator).isHealthy('pgqueue', { listenerGraceMs: 0 });
      expect(health.pgqueue.status).toBe('down');
      expect(health.pgqueue.listener).toMatch(/^disconnected for \d+ ms \(connection "bulk"\)$/);
      expect(health.pgqueue.problems).toEqual([
        expect.stringMatching(/^listener of connection "bulk": LISTEN connection down for \d+ ms > listenerGraceMs 0/),
      ]);
    } finally {
      await app.close();
    }
  });
});
