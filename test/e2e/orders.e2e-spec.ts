import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Client } from 'pg';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import type { OrderView } from '../../sample/orders.service';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

/** The sample app (sample/) over HTTP, on its own fresh database. */
describe('sample app: POST /orders, GET /orders/:id', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let sql: Client;

  const http = () => request(app.getHttpServer());
  const count = async (query: string, params: unknown[] = []) =>
    (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${query}`, params)).rows[0].n;
  /** GETs the order until its job has completed; returns that last view. */
  async function whenCompleted(id: number): Promise<OrderView> {
    let view: OrderView | undefined;
    await waitFor(
      async () => {
        view = (await http().get(`/orders/${id}`).expect(200)).body as OrderView;
        return view.job?.state === 'completed';
      },
      { timeoutMs: 10_000, message: () => `the job of order ${id} to complete; last GET: ${JSON.stringify(view)}` },
    );
    // The GET reads the order before the job: read again, now that the handler has committed.
    return (await http().get(`/orders/${id}`).expect(200)).body as OrderView;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule.forRoot(db.url)] }).compile();
    app = moduleRef.createNestApplication({ logger: process.env.PGQUEUE_TEST_LOGS ? undefined : false });
    await app.init();
    sql = new Client({ connectionString: db.url });
    await sql.connect();
  });

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

    const view = await whenCompleted(body.order.id);
    expect(view).toMatchObject({
      order: { id: body.order.id, item: 'book', status: 'confirmed', jobId: body.job!.id },
      job: { id: body.job!.id, state: 'completed', attempt: 1 },
      email: { orderId: body.order.id, message: `Your order #${body.order.id} (book) is confirmed.` },
    });
    expect(await count('email_logs WHERE order_id = $1', [body.order.id])).toBe(1);
  });

  it('with "fail": true answers 422 and leaves no order, no job and no email', async () => {
    const ordersBefore = await count('orders');
    const emailsBefore = await count('email_logs');

    const res = await http().post('/orders').send({ item: 'lamp', fail: true }).expect(422);
    const rolledBack = /^Order (\d+) failed after its job (\d+) was enqueued .* rolled back/;
    expect(res.body.message).toMatch(rolledBack);
    const [, orderId, jobId] = rolledBack.exec(res.body.message)!;

    // Enqueued after the failed one: once it has run, the worker has had every chance to run the
    // rolled-back job too, had it been committed.
    const next = (await http().post('/orders').send({ item: 'pen' }).expect(201)).body as OrderView;
    expect((await whenCompleted(next.order.id)).order.status).toBe('confirmed');

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
    let view: OrderView | undefined;
    await waitFor(
      async () => {
        view = (await http().get(`/orders/${placed.order.id}`).expect(200)).body as OrderView;
        return view.warehouseJob?.state === 'completed';
      },
      { timeoutMs: 15_000, message: () => `warehouse job to complete; last GET: ${JSON.stringify(view)}` },
    );
    expect(view!.warehouseJob).toMatchObject({ attempt: 3, errors: ['Warehouse API timed out (simulated)', 'Warehouse API timed out (simulated)'] });
  });

  it('a warehouse job that fails every attempt ends failed with each error kept', async () => {
    const placed = (await http().post('/orders').send({ item: 'unobtainium' }).expect(201)).body as OrderView;
    let view: OrderView | undefined;
    await waitFor(
      async () => {
        view = (await http().get(`/orders/${placed.order.id}`).expect(200)).body as OrderView;
        return view.warehouseJob?.state === 'failed';
      },
      { timeoutMs: 15_000, message: () => `warehouse job to fail; last GET: ${JSON.stringify(view)}` },
    );
    expect(view!.warehouseJob!.attempt).toBe(3);
    expect(view!.warehouseJob!.errors).toEqual(Array(3).fill('No such item in the warehouse: unobtainium'));
    expect(view!.order.status).toBe('confirmed'); // the confirmation does not depend on the reservation
  });

  it('rejects a body without an item (400) and an unknown order (404)', async () => {
    const bad = await http().post('/orders').send({}).expect(400);
    expect(bad.body.message).toContain('{"item": "book"}');
    await http().get('/orders/999999').expect(404);
  });
});
