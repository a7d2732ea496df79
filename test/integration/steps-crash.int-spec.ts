import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import path from 'node:path';
import { Client } from 'pg';
import { QueueService, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { killAll, ROOT, startWorkerProcess, type WorkerProcess } from '../support/worker-process';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

// Durable steps through crashes (issue 31): a checkout handler of five steps (a transactional
// reserve, an outside charge, a sleep, a wait for a signal, a transactional email) in real worker
// processes (test/fixtures/steps-worker-process.js, the BUILT package), SIGKILLed inside a
// transactional step (after its write, before its record and commit), between an outside call
// and its record, and while the job sleeps. Each time a new worker is started in its place.
// Exactly one committed effect per transactional step, one charge per idempotency key (the call
// itself may run twice: at least once), and every job ends once, completed.

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'steps-worker-process.js');
/** A killed worker's job is rescued within about four seconds. */
const FAST = { PGQ_LEASE_MS: 4000, PGQ_HEARTBEAT_MS: 400, PGQ_RESCUE_MS: 300, PGQ_POLL_MS: 200 };

type Worker = WorkerProcess;

const started: Worker[] = [];

function startWorker(name: string, dbUrl: string): Worker {
  return startWorkerProcess(started, FIXTURE, name, { DB_URL: dbUrl, ...FAST });
}

describe('durable steps across SIGKILLed workers', () => {
  let db: TestDatabase | undefined;
  let sql: Client | undefined;
  let producer: INestApplicationContext | undefined;
  let queue: Queue;

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
    await sql.query(`CREATE TABLE effects (job_id bigint NOT NULL, step text NOT NULL, attempt int NOT NULL)`);
    await sql.query(`CREATE TABLE calls (job_id bigint NOT NULL, key text NOT NULL)`);
    await sql.query(`CREATE TABLE charges (key text PRIMARY KEY, job_id bigint NOT NULL)`);
    await sql.query(`CREATE TABLE deaths (job_id bigint NOT NULL, point text NOT NULL, PRIMARY KEY (job_id, point))`);
  });

  afterAll(async () => {
    await killAll(started);
    await producer?.close();
    await sql?.end().catch(() => undefined);
    await db?.drop();
  });

  it('commits each transactional step once, charges once per key, and ends every job once, whatever is killed', async () => {
    const opts = { attempts: 10 };
    const a = await queue.add('checkout', { sleepMs: 1500, dieAt: ['in-reserve', 'after-charge', 'in-email'] }, opts);
    const b = await queue.add('checkout', { sleepMs: 1500, dieAt: [] }, opts);
    const c = await queue.add('checkout', { sleepMs: 1500, dieAt: ['after-charge'] }, opts);
    const ids = [a.id, b.id, c.id];
    // c's approval comes before it waits: kept for it.
    expect(await queue.signal(c.id, 'approved', { by: 'early' })).toBe(true);

    let worker = startWorker('worker-1', db!.url);
    let n = 1;
    let killedAsleep = false;
    const signalled = new Set<string>([c.id]);
    const describeState = async () =>
      JSON.stringify(await q(`SELECT job_id, name, status, attempt FROM pgqueue.job_steps ORDER BY job_id, seq`)) +
      JSON.stringify(await q(`SELECT id, state, attempt, locked_by, run_at FROM pgqueue.jobs`)) +
      started.map((w) => `\n${w.name} ${JSON.stringify(w.exit)}\n${w.output().slice(-1500)}`).join('');

    await waitFor(
      async () => {
        if (worker.exit) worker = startWorker(`worker-${++n}`, db!.url);
        // A sleep in progress, the job parked (no lease): kill the worker that ran it.
        if (!killedAsleep) {
          const asleep = await q(
            `SELECT 1 FROM pgqueue.job_steps s JOIN pgqueue.jobs j ON j.id = s.job_id
             WHERE s.name = 'cool-off' AND s.status = 'sleeping' AND j.locked_by IS NULL AND j.run_at > now()`,
          );
          if (asleep.length > 0) {
            killedAsleep = true;
            worker.proc.kill('SIGKILL');
            await worker.exited;
            worker = startWorker(`worker-${++n}`, db!.url);
          }
        }
        const waiting = await q<{ job_id: string }>(
          `SELECT job_id FROM pgqueue.job_steps WHERE name = 'approved' AND status = 'waiting'`,
        );
        for (const { job_id } of waiting) {
          if (signalled.has(String(job_id))) continue;
          signalled.add(String(job_id));
          expect(await queue.signal(String(job_id), 'approved', { by: 'ann' })).toBe(true);
        }
        const done = await q(`SELECT id FROM pgqueue.job_history WHERE state = 'completed' AND id = ANY($1::bigint[])`, [ids]);
        return done.length === ids.length;
      },
      { timeoutMs: 120_000, intervalMs: 100, message: describeState },
    );

    // The kills happened where they were asked to, and one while a job slept.
    expect(killedAsleep).toBe(true);
    expect(await q(`SELECT job_id::text, point FROM deaths ORDER BY job_id, point`)).toEqual([
      { job_id: a.id, point: 'after-charge' },
      { job_id: a.id, point: 'in-email' },
      { job_id: a.id, point: 'in-reserve' },
      { job_id: c.id, point: 'after-charge' },
    ]);
    // Each job ends once: one history row, completed, none left live.
    expect(await q(`SELECT id::text, state FROM pgqueue.job_history ORDER BY id`)).toEqual(
      ids.map((id) => ({ id, state: 'completed' })),
    );
    expect(await q(`SELECT id FROM pgqueue.jobs`)).toEqual([]);
    // Exactly one committed effect per transactional step, however many runs were cut short.
    expect(await q(`SELECT job_id::text, step, count(*)::int AS n FROM effects GROUP BY 1, 2 ORDER BY 1, 2`)).toEqual(
      ids.flatMap((id) => [
        { job_id: id, step: 'email', n: 1 },
        { job_id: id, step: 'reserve', n: 1 },
      ]),
    );
    // The outside call is at least once (a's and c's ran again after the kill between the call
    // and its record), always with the same key, so the charge is made once.
    const calls = await q<{ job_id: string; n: number; keys: number }>(
      `SELECT job_id::text, count(*)::int AS n, count(DISTINCT key)::int AS keys FROM calls GROUP BY 1 ORDER BY 1`,
    );
    expect(calls.map((r) => r.keys)).toEqual([1, 1, 1]);
    expect(calls.find((r) => r.job_id === a.id)!.n).toBeGreaterThanOrEqual(2);
    expect(calls.find((r) => r.job_id === c.id)!.n).toBeGreaterThanOrEqual(2);
    expect(await q(`SELECT job_id::text, key FROM charges ORDER BY job_id`)).toEqual(
      ids.map((id) => ({ job_id: id, key: `${id}:charge` })),
    );
    // The results: c's early approval kept for it, the others' delivered while they waited.
    for (const id of ids) {
      const job = await queue.getJob(id);
      expect(job?.result).toMatchObject({
        charge: { chargeKey: `${id}:charge` },
        approval: { by: id === c.id ? 'early' : 'ann' },
      });
      expect((await queue.getJobSteps(id)).map((s) => [s.name, s.status])).toEqual([
        ['reserve', 'done'],
        ['charge', 'done'],
        ['cool-off', 'done'],
        ['approved', 'done'],
        ['email', 'done'],
      ]);
    }
  }, 180_000);
});
