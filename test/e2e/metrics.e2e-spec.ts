import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import type { OrderView } from '../../sample/orders.service';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

/**
 * Sum of the samples of `metric` whose labels include `labels`, read from Prometheus' text
 * format; 0 when there is none (a labelled counter has no sample until it first moves).
 */
function read(text: string, metric: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== metric) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/** The sample app's GET /metrics, on its own fresh database and its own prom-client Registry. */
describe('sample app: GET /metrics', () => {
  let db: TestDatabase;
  let app: INestApplication;

  const http = () => request(app.getHttpServer());
  const metrics = async () => (await http().get('/metrics').expect(200)).text;
  /** GETs the order until `done` holds for it; returns that last view. */
  async function orderUntil(id: number, what: string, done: (v: OrderView) => boolean): Promise<OrderView> {
    let view: OrderView | undefined;
    await waitFor(
      async () => {
        view = (await http().get(`/orders/${id}`).expect(200)).body as OrderView;
        return done(view);
      },
      { timeoutMs: 15_000, message: () => `${what} of order ${id}; last GET: ${JSON.stringify(view)}` },
    );
    return view!;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule.forRoot(db.url)] }).compile();
    app = moduleRef.createNestApplication({ logger: process.env.PGQUEUE_TEST_LOGS ? undefined : false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('answers in the Prometheus text format, with queue depth and the listener', async () => {
    const res = await http().get('/metrics').expect(200);
    // The registry's content type (Express moves its charset parameter forward).
    expect(res.headers['content-type']).toMatch(/^text\/plain;/);
    expect(res.headers['content-type']).toContain('version=0.0.4');
    for (const metric of [
      'jobs_enqueued_total',
      'jobs_completed_total',
      'jobs_failed_total',
      'jobs_retried_total',
      'jobs_stalled_total',
    ]) {
      expect(res.text).toContain(`# TYPE pgqueue_${metric} counter`);
    }
    expect(res.text).toContain('# TYPE pgqueue_job_duration_seconds histogram');
    expect(res.text).toContain('# TYPE pgqueue_job_wait_seconds histogram');
    // Both registered queues are reported, even before they hold a job.
    expect(res.text).toMatch(/^pgqueue_queue_jobs\{queue="orders",state="waiting"\} \d+$/m);
    expect(res.text).toMatch(/^pgqueue_queue_jobs\{queue="warehouse",state="failed"\} \d+$/m);
    let text = res.text;
    await waitFor(async () => read((text = await metrics()), 'pgqueue_listener_connected') === 1, {
      message: () =>
        `pgqueue_listener_connected 1; last: ${text
          .split('\n')
          .filter((l) => l.includes('listener'))
          .join(' | ')}`,
    });
  });

  it('counts the jobs of POST /orders: enqueued, completed, retried, with their timings', async () => {
    const confirmation = { queue: 'orders', name: 'send-confirmation' };
    const reserve = { queue: 'warehouse', name: 'reserve-stock' };
    const before = await metrics();

    const placed = (await http().post('/orders').send({ item: 'book' }).expect(201)).body as OrderView;
    // The counter moves when the handler returns, before the outcome is written: once the order
    // reads completed, it has moved.
    await orderUntil(placed.order.id, 'the confirmation job to complete', (v) => v.job?.state === 'completed');
    let after = await metrics();
    expect(read(after, 'pgqueue_jobs_completed_total', confirmation)).toBe(
      read(before, 'pgqueue_jobs_completed_total', confirmation) + 1,
    );
    expect(read(after, 'pgqueue_jobs_enqueued_total', confirmation)).toBe(
      read(before, 'pgqueue_jobs_enqueued_total', confirmation) + 1,
    );
    expect(read(after, 'pgqueue_jobs_enqueued_total', reserve)).toBe(read(before, 'pgqueue_jobs_enqueued_total', reserve) + 1);
    const timed = { ...confirmation, outcome: 'completed' };
    expect(read(after, 'pgqueue_job_duration_seconds_count', timed)).toBe(
      read(before, 'pgqueue_job_duration_seconds_count', timed) + 1,
    );
    expect(read(after, 'pgqueue_job_wait_seconds_count', confirmation)).toBe(
      read(before, 'pgqueue_job_wait_seconds_count', confirmation) + 1,
    );

    // The warehouse job fails twice, then succeeds on its third attempt (sample/warehouse.processor.ts).
    await orderUntil(placed.order.id, 'the warehouse job to complete', (v) => v.warehouseJob?.state === 'completed');
    after = await metrics();
    expect(read(after, 'pgqueue_jobs_retried_total', reserve)).toBe(read(before, 'pgqueue_jobs_retried_total', reserve) + 2);
    expect(read(after, 'pgqueue_jobs_completed_total', reserve)).toBe(read(before, 'pgqueue_jobs_completed_total', reserve) + 1);
    expect(read(after, 'pgqueue_jobs_failed_total', reserve)).toBe(read(before, 'pgqueue_jobs_failed_total', reserve));
  });
});
