import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Client } from 'pg';
import request from 'supertest';
import { PgQueueModule, QueueService } from '../../lib';
import { PgQueueHealthIndicator, type PgQueueHealthDetails } from '../../lib/health';
import { AppModule } from '../../sample/app.module';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { TcpProxy } from '../support/tcp-proxy';

/** The body Terminus answers with: 200 `ok` or 503 `error`, our details under the `pgqueue` key. */
interface HealthBody {
  status: 'ok' | 'error';
  details: { pgqueue: PgQueueHealthDetails & { status: 'up' | 'down' } };
}

const GRACE_MS = 500;

/**
 * The sample's `GET /health` (sample/health.controller.ts) over HTTP. The queue's pool and its
 * LISTEN connection each go through a TCP proxy the test can cut, so "the database does not
 * answer" and "the listener is down" happen exactly when the test says, and only to the queue.
 */
describe('sample app: GET /health', () => {
  let db: TestDatabase;
  let listenProxy: TcpProxy;
  let poolProxy: TcpProxy;
  let app: INestApplication;
  let sql: Client;
  const graceBefore = process.env.HEALTH_LISTENER_GRACE_MS;

  const http = () => request(app.getHttpServer());
  let last: { status: number; body: HealthBody } | undefined;
  async function health(): Promise<{ status: number; body: HealthBody }> {
    const res = await http().get('/health');
    last = { status: res.status, body: res.body as HealthBody };
    return last;
  }
  const lastSeen = () => `last GET /health: ${last?.status} ${JSON.stringify(last?.body)}`;
  /** Polls /health until it answers 200 with the listener connected. */
  const healthy = (timeoutMs = 15_000) =>
    waitFor(
      async () => {
        const r = await health();
        return r.status === 200 && r.body.details.pgqueue.listener === 'connected';
      },
      { timeoutMs, intervalMs: 50, message: () => `/health to be up with the listener connected; ${lastSeen()}` },
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    listenProxy = await TcpProxy.forUrl(db.url);
    poolProxy = await TcpProxy.forUrl(db.url);
    process.env.HEALTH_LISTENER_GRACE_MS = String(GRACE_MS); // read when the controller is created
    const moduleRef = await Test.createTestingModule({
      imports: [
        AppModule.forRoot(db.url, { connection: poolProxy.urlThrough(db.url), listenConnection: listenProxy.urlThrough(db.url) }),
        // A queue no processor of the sample runs, for the maxAvailable check below.
        PgQueueModule.registerQueue({ name: 'health-e2e' }),
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: process.env.PGQUEUE_TEST_LOGS ? undefined : false });
    await app.init();
    sql = new Client({ connectionString: db.url });
    await sql.connect();
  });

  afterAll(async () => {
    if (graceBefore === undefined) delete process.env.HEALTH_LISTENER_GRACE_MS;
    else process.env.HEALTH_LISTENER_GRACE_MS = graceBefore;
    await sql?.end();
    await app?.close();
    await listenProxy?.stop();
    await poolProxy?.stop();
    await db?.drop();
  });

  it("answers 200 with every registered queue's figures, the listener and the workers", async () => {
    await healthy();
    const empty = {
      available: 0,
      oldestAvailableAgeMs: null,
      delayed: 0,
      active: 0,
      stalled: 0,
      failed: 0,
      waitingChildren: 0,
      sleeping: 0,
      waitingSignal: 0,
    };
    expect(last!.body).toMatchObject({
      status: 'ok',
      details: {
        pgqueue: {
          status: 'up',
          listener: 'connected',
          workers: 'running',
          problems: [],
          queues: { orders: empty, warehouse: empty },
        },
      },
    });
    // This process, from the nodes registry (its first heartbeat writes its row).
    await waitFor(async () => (await health()).body.details.pgqueue.nodes === 1, { message: 'nodes: 1 in the details' });
  });

  it('answers 503 once the listener has been down longer than its grace period, and 200 after it reconnects', async () => {
    await healthy();
    await listenProxy.stop();
    await waitFor(async () => (await health()).status === 503, {
      timeoutMs: 10_000,
      intervalMs: 50,
      message: () => `/health to answer 503 after the listener was cut; ${lastSeen()}`,
    });
    const down = last!.body.details.pgqueue;
    expect(last!.body.status).toBe('error');
    expect(down).toMatchObject({ status: 'down', workers: 'running', queues: { orders: { available: 0 } } });
    expect(down.listener).toMatch(/^disconnected for \d+ ms$/);
    expect(down.problems).toEqual([
      expect.stringMatching(new RegExp(`^listener: LISTEN connection down for \\d+ ms > listenerGraceMs ${GRACE_MS} `)),
    ]);
    // Not before the grace period: the outage it judged (from the listener's own record of the
    // drop) was longer than the grace. (The verdict's boundary is unit-tested in health-evaluation.spec.ts.)
    expect(Number(/down for (\d+) ms/.exec(down.problems[0])![1])).toBeGreaterThan(GRACE_MS);

    await listenProxy.start(); // the listener reconnects by itself, with backoff
    await healthy();
  });

  it('answers 503 when a queue has more available jobs than maxAvailable (1,000), and 200 once they are gone', async () => {
    await healthy();
    // A queue without a processor: its jobs stay available, and the overall limit applies to it.
    const queue = 'health-e2e';
    await app.get(QueueService).addBulk(
      queue,
      Array.from({ length: 1001 }, (_, i) => ({ name: 'noop', payload: { i } })),
    );

    const r = await health();
    expect(r.status).toBe(503);
    expect(r.body.details.pgqueue.queues[queue]).toMatchObject({ available: 1001, active: 0 });
    expect(r.body.details.pgqueue.problems).toEqual([`queue "${queue}": 1001 available > maxAvailable 1000`]);

    await sql.query('DELETE FROM pgqueue.jobs WHERE queue = $1', [queue]);
    expect((await health()).status).toBe(200);
  });

  it('answers 503 naming the error while the database does not answer, and 200 once it does', async () => {
    await healthy();
    await poolProxy.stop(); // the queue's pool only: the listener and TypeORM go elsewhere
    await waitFor(async () => (await health()).status === 503, {
      timeoutMs: 10_000,
      intervalMs: 50,
      message: () => `/health to answer 503 with the database cut; ${lastSeen()}`,
    });
    const down = last!.body.details.pgqueue;
    expect(down).toMatchObject({ status: 'down', queues: {}, listener: 'connected', workers: 'running' });
    expect(down.problems).toEqual([expect.stringMatching(/^database: (?!Error:)\S/)]); // the message itself, not "Error: ..."

    await poolProxy.start();
    await healthy();
  });

  it('is down when the database answers later than timeoutMs (a lock holds the counts query back)', async () => {
    await healthy();
    const indicator = app.get(PgQueueHealthIndicator);
    await sql.query('BEGIN');
    try {
      await sql.query('LOCK TABLE pgqueue.jobs IN ACCESS EXCLUSIVE MODE');
      // The lock is held until after this returns: that it returns at all shows it did not wait for the query.
      const r = await indicator.isHealthy('queue', { timeoutMs: 200 });
      expect(r.queue).toMatchObject({ status: 'down', queues: {}, problems: ['database: no answer within timeoutMs 200'] });
    } finally {
      await sql.query('ROLLBACK');
    }
    expect((await indicator.isHealthy('queue', { timeoutMs: 5_000 })).queue.status).toBe('up');
  });
});
