import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Client } from 'pg';
import request from 'supertest';
import { PgQueueTester, PgQueueTestingModule } from '../../lib/testing';
import { AppModule } from '../../sample/app.module';
import type { OrderView } from '../../sample/orders.service';
import { createTestDatabase, type TestDatabase } from '../support/database';

/**
 * The sample app (sample/) over HTTP, on its own fresh database, its jobs run by the real
 * processors through nestjs-pg-queue/testing: each step runs the jobs then due, so nothing waits
 * on a poll or a backoff. (health.e2e-spec.ts and metrics.e2e-spec.ts run the same app with its
 * workers running on their own.)
 */
describe('sample app: POST /orders, GET /orders/:id', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let sql: Client;
  let tester: PgQueueTester;

  const http = () => request(app.getHttpServer());
  const count = async (query: string, params: unknown[] = []) =>
    (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${query}`, params)).rows[0].n;
  const view = async (id: number) => (await http().get(`/orders/${id}`).expect(200)).body as OrderView;
  /** Runs the jobs that are due, then GETs the order. */
  async function afterJobsRan(id: number): Promise<OrderView> {
    await tester.drain();
    return view(id);
  }
  beforeAll(async () => {
    db = await createTestDatabase();
    const moduleRef = await Test.createTestingModule({
      imports: [AppModule.forRoot(db.url), PgQueueTestingModule.forRoot()],
    }).compile();
    app = moduleRef.createNestApplication({ logger: process.env.PGQUEUE_TEST_LOGS ? undefined : false });
    await app.init();
    tester = app.get(PgQueueTester);
    sql = new Client({ connectionString: db.url });
    await sql.connect();
  });

  beforeEach(() => tester.clear());

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  it('saves the order with a waiting job; the worker confirms it and logs the email', async () => {
    const placed = await http().post('/orders').send({ item: 'book' }).expect(201);
    const body = placed.body as OrderView;
    expect(body).toMatchObject({ order: { item: 'book', status: 'pending' }, job: { state: 'waiting' }, email: null });
    expect(body.order.jobId).toBe(body.job!.id);

    const after = await afterJobsRan(body.order.id);
    expect(after).toMatchObject({
      order: { id: body.order.id, item: 'book', status: 'confirmed', jobId: body.job!.id },
      job: { id: body.job!.id, state: 'completed', attempt: 1 },
      email: { orderId: body.order.id, message: `Your order #${body.order.id} (book) is confirmed.` },
    });
    expect(tester.completed.map((o) => o.job.id)).toContain(body.job!.id);
    expect(await count('email_logs WHERE order_id = $1', [body.order.id])).toBe(1);
  });

  it('with "fail": true answers 422 and leaves no order, no job and no email', async () => {
    const ordersBefore = await count('orders');
    const emailsBefore = await count('email_logs');

    const res = await http().post('/orders').send({ item: 'lamp', fail: true }).expect(422);
    const rolledBack = /^Order (\d+) failed after its job (\d+) was enqueued .* rolled back/;
    expect(res.body.message).toMatch(rolledBack);
    const [, orderId, jobId] = rolledBack.exec(res.body.message)!;

    const next = (await http().post('/orders').send({ item: 'pen' }).expect(201)).body as OrderView;
    // Every job that is due runs here (retries included): had the rolled-back job been committed, it would be among them.
    await tester.drain({ makeDue: true });
    expect((await view(next.order.id)).order.status).toBe('confirmed');
    expect(tester.ran.map((j) => j.id)).not.toContain(jobId);
    expect(tester.ran.map((j) => j.id)).toContain(next.job!.id);

    await http().get(`/orders/${orderId}`).expect(404);
    expect(await count('orders WHERE id = $1', [orderId])).toBe(0);
    for (const table of ['pgqueue.jobs', 'pgqueue.job_history']) {
      expect(await count(`${table} WHERE id = $1 OR payload->>'orderId' = $2`, [jobId, orderId])).toBe(0);
    }
    expect(await count('email_logs WHERE order_id = $1', [orderId])).toBe(0);
    expect(await count('orders')).toBe(ordersBefore + 1); // only "pen"
    expect(await count('email_logs')).toBe(emailsBefore + 1);
  });

  it('retries the warehouse job with backoff until its third attempt succeeds', async () => {
    const placed = (await http().post('/orders').send({ item: 'lamp' }).expect(201)).body as OrderView;
    expect(placed.warehouseJob).toMatchObject({ state: 'waiting', attempt: 0 });
    // makeDue: each retry runs as soon as nothing else is due, not after its 300 ms backoff.
    await tester.drain({ makeDue: true });
    const after = await view(placed.order.id);
    expect(after.warehouseJob).toMatchObject({
      state: 'completed',
      attempt: 3,
      errors: ['Warehouse API timed out (simulated)', 'Warehouse API timed out (simulated)'],
    });
    const id = placed.warehouseJob!.id;
    expect(tester.retried.filter((o) => o.job.id === id).map((o) => o.job.attempt)).toEqual([1, 2]);
  });

  it('a warehouse job that fails every attempt ends failed with each error kept', async () => {
    const placed = (await http().post('/orders').send({ item: 'unobtainium' }).expect(201)).body as OrderView;
    await tester.drain({ makeDue: true });
    const after = await view(placed.order.id);
    expect(after.warehouseJob).toMatchObject({ state: 'failed', attempt: 3 });
    expect(after.warehouseJob!.errors).toEqual(Array(3).fill('No such item in the warehouse: unobtainium'));
    expect(tester.failed.map((o) => [o.job.id, o.error.message])).toEqual([
      [placed.warehouseJob!.id, 'No such item in the warehouse: unobtainium'],
    ]);
    expect(after.order.status).toBe('confirmed'); // the confirmation does not depend on the reservation
  });

  it('rejects a body without an item (400) and an unknown order (404)', async () => {
    const bad = await http().post('/orders').send({}).expect(400);
    expect(bad.body.message).toContain('{"item": "book"}');
    await http().get('/orders/999999').expect(404);
  });
});
