import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Client } from 'pg';
import { QueueService, type Queue, type QueueCounts } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { killAll, ROOT, startWorkerProcess, type WorkerProcess } from '../support/worker-process';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

// Issue 31's "Done when": a checkout handler of five steps (a { manager } write in the app's
// TypeORM transaction, an HTTP charge, a day's sleep, a wait for an approval signal, an HTTP
// email) in worker processes (test/fixtures/steps-checkout-process.js, the BUILT package),
// SIGKILLed inside the { manager } step before its commit, between the charge step's function and
// its record, during the sleep, during the wait, and inside the email step; a new worker is
// started each time. One order row, one charge key and one email key, the job completed once,
// and no worker held while it slept or waited.

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'steps-checkout-process.js');
/** A killed worker's job is rescued within about four seconds. */
const FAST = { PGQ_LEASE_MS: 4000, PGQ_HEARTBEAT_MS: 400, PGQ_RESCUE_MS: 300, PGQ_POLL_MS: 200 };

type Worker = WorkerProcess;

const started: Worker[] = [];

function startWorker(name: string, env: Record<string, string>): Worker {
  return startWorkerProcess(started, FIXTURE, name, { ...env, ...FAST });
}

/** The "payment provider" and "mailer": every call counted, with its Idempotency-Key. */
function countingServer() {
  const calls: { path: string; key: string }[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls.push({ path: req.url ?? '', key: String(req.headers['idempotency-key'] ?? '') });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: `${req.url}:${req.headers['idempotency-key']}` }));
    });
  });
  return { server, calls };
}

describe('a checkout of five durable steps, SIGKILLed at every point', () => {
  let db: TestDatabase | undefined;
  let sql: Client | undefined;
  let producer: INestApplicationContext | undefined;
  let queue: Queue;
  const api = countingServer();
  let httpUrl = '';

  const q = async <T extends object>(text: string, params: unknown[] = []): Promise<T[]> =>
    (await sql!.query(text, params)).rows as T[];

  beforeAll(async () => {
    assertBuilt();
    db = await createTestDatabase();
    sql = new Client({ connectionString: db.url });
    await sql.connect();
    producer = await bootApp({ options: { connection: db.url, workers: false }, queues: [{ name: 'checkout' }] });
    await producer.init();
    queue = producer.get(QueueService).getQueue('checkout');
    await sql.query(`CREATE TABLE orders (id bigserial PRIMARY KEY, job_id bigint NOT NULL, sku text NOT NULL)`);
    await sql.query(`CREATE TABLE deaths (job_id bigint NOT NULL, point text NOT NULL, PRIMARY KEY (job_id, point))`);
    await new Promise<void>((resolve) => api.server.listen(0, '127.0.0.1', resolve));
    httpUrl = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await killAll(started);
    await new Promise((resolve) => api.server.close(resolve));
    await producer?.close();
    await sql?.end().catch(() => undefined);
    await db?.drop();
  });

  it('commits the order once, charges and emails once per key, and completes the job once', async () => {
    const dieAt = ['in-reserve', 'before-charge-record', 'in-email'];
    const job = await queue.add('checkout', { dieAt }, { attempts: 10 });
    const env = { DB_URL: db!.url, HTTP_URL: httpUrl };
    let worker = startWorker('worker-1', env);
    let n = 1;
    const restart = async () => {
      worker.proc.kill('SIGKILL');
      await worker.exited;
      worker = startWorker(`worker-${++n}`, env);
    };
    const parkedOn = async (step: string, status: string) =>
      (
        await q(
          `SELECT 1 FROM pgqueue.job_steps s JOIN pgqueue.jobs j ON j.id = s.job_id
           WHERE s.job_id = $1 AND s.name = $2 AND s.status = $3 AND j.state = 'waiting' AND j.locked_by IS NULL
             AND j.run_at > now()`,
          [job.id, step, status],
        )
      ).length > 0;
    let slept: { state: string | undefined; counts: QueueCounts } | null = null;
    let waited: { state: string | undefined; counts: QueueCounts } | null = null;
    const describeState = async () =>
      JSON.stringify(await q(`SELECT name, status, attempt, wake_at FROM pgqueue.job_steps ORDER BY seq`)) +
      JSON.stringify(await q(`SELECT id, state, attempt, locked_by, run_at FROM pgqueue.jobs`)) +
      JSON.stringify(api.calls) +
      started.map((w) => `\n${w.name} ${JSON.stringify(w.exit)}\n${w.output().slice(-1500)}`).join('');

    await waitFor(
      async () => {
        if (worker.exit) worker = startWorker(`worker-${++n}`, env);
        if (!slept && (await parkedOn('cool-off', 'sleeping'))) {
          // Asleep for a day: no worker holds it. Kill the worker anyway, then end the sleep
          // (what PgQueueTester's makeDue does: the recorded wake time and the job's run_at to now).
          slept = { state: (await queue.getJob(job.id))?.state, counts: await queue.getCounts() };
          await restart();
          await q(`UPDATE pgqueue.job_steps SET wake_at = now() WHERE job_id = $1 AND name = 'cool-off'`, [job.id]);
          await q(`UPDATE pgqueue.jobs SET run_at = now() WHERE id = $1`, [job.id]);
        }
        if (!waited && (await parkedOn('approved', 'waiting'))) {
          waited = { state: (await queue.getJob(job.id))?.state, counts: await queue.getCounts() };
          await restart();
          expect(await queue.signal(job.id, 'approved', { by: 'ann' })).toBe(true);
        }
        return (await q(`SELECT 1 FROM pgqueue.job_history WHERE id = $1`, [job.id])).length > 0;
      },
      { timeoutMs: 120_000, intervalMs: 100, message: describeState },
    );

    // The kills happened where they were asked to, and the sleep and the wait were seen parked.
    expect(await q(`SELECT point FROM deaths ORDER BY point`)).toEqual([
      { point: 'before-charge-record' },
      { point: 'in-email' },
      { point: 'in-reserve' },
    ]);
    expect(slept).not.toBeNull();
    expect(waited).not.toBeNull();
    // No worker held the job while it slept or waited: it was not active.
    expect(slept!.state).toBe('delayed');
    expect(slept!.counts).toMatchObject({ active: 0, sleeping: 1, waitingSignal: 0, delayed: 0 });
    expect(waited!.counts).toMatchObject({ active: 0, sleeping: 0, waitingSignal: 1, delayed: 0 });
    // The job ended once, completed.
    expect(await q(`SELECT id::text, state FROM pgqueue.job_history`)).toEqual([{ id: job.id, state: 'completed' }]);
    expect(await q(`SELECT id FROM pgqueue.jobs`)).toEqual([]);
    // One order row, though its step's first run was killed before its commit.
    const orders = await q<{ id: string }>(`SELECT id::text FROM orders WHERE job_id = $1`, [job.id]);
    expect(orders).toHaveLength(1);
    // The HTTP steps ran twice (killed after the call, before the record), with one key each.
    const byPath = (p: string) => api.calls.filter((c) => c.path === p);
    expect(byPath('/charge').length).toBeGreaterThanOrEqual(2);
    expect(new Set(byPath('/charge').map((c) => c.key))).toEqual(new Set([`${job.id}:charge`]));
    expect(byPath('/email').length).toBeGreaterThanOrEqual(2);
    expect(new Set(byPath('/email').map((c) => c.key))).toEqual(new Set([`${job.id}:email`]));
    const done = await queue.getJob(job.id);
    expect(done?.result).toMatchObject({
      order: { orderId: orders[0].id },
      charge: { id: `/charge:${job.id}:charge` },
      approval: { by: 'ann' },
    });
    expect((await queue.getJobSteps(job.id)).map((s) => [s.name, s.status])).toEqual([
      ['reserve', 'done'],
      ['charge', 'done'],
      ['cool-off', 'done'],
      ['approved', 'done'],
      ['email', 'done'],
    ]);
  }, 180_000);
});
