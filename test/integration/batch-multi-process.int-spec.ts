import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import path from 'node:path';
import { Client } from 'pg';
import { getQueueToken, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { killAll, ROOT, startWorkerProcess, untilReady, type WorkerProcess } from '../support/worker-process';

// Batch handlers (docs/processing.md#batch-handlers) across TWO worker processes
// (test/fixtures/batch-worker-process.js, the BUILT package), one SIGKILLed in the middle of a
// call: every job ends once, completed, and the dead node's jobs come back when their leases
// expire and are run by the other node. Checked from the database (job_history), not from the
// workers' counters.

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'batch-worker-process.js');
const LEASE_MS = 3000;
const HEARTBEAT_MS = 500;

type Worker = WorkerProcess;
const started: Worker[] = [];

function startWorker(name: string, url: string): Worker {
  return startWorkerProcess(started, FIXTURE, name, {
    DB_URL: url,
    PGQ_CONCURRENCY: '20',
    PGQ_BATCH_SIZE: '10',
    PGQ_BATCH_WAIT_MS: '50',
    // Long enough that the kill lands inside a call.
    PGQ_BATCH_MS: '400',
    PGQ_POLL_MS: '200',
    PGQ_LEASE_MS: LEASE_MS,
    PGQ_HEARTBEAT_MS: HEARTBEAT_MS,
    PGQ_RESCUE_MS: '500',
  });
}

/** The job ids of every call `w` started (its 'batch <pid> <ids>' lines). */
const batchesOf = (w: Worker): string[][] => [...w.output().matchAll(/^batch \d+ ([\d,]+)$/gm)].map((m) => m[1].split(','));

describe('batch handlers across two processes, one SIGKILLed mid-call', () => {
  let db: TestDatabase;
  let sql: Client;
  let producer: INestApplicationContext;

  beforeAll(async () => {
    assertBuilt();
    db = await createTestDatabase();
    sql = new Client({ connectionString: db.url });
    await sql.connect();
  }, 60_000);

  afterAll(async () => {
    await killAll(started);
    await producer?.close();
    await sql?.end().catch(() => undefined);
    await db?.drop();
  });

  it('every job completes once; the killed node’s jobs come back after their leases and run on the other node', async () => {
    const [a, b] = [startWorker('worker-a', db.url), startWorker('worker-b', db.url)];
    await Promise.all([a, b].map(untilReady));
    producer = await bootApp({ options: { connection: db.url, workers: false }, queues: [{ name: 'batched' }] });
    await producer.init();
    const queue = producer.get<Queue>(getQueueToken('batched'));
    const total = 300;
    const added = await queue.addBulk(Array.from({ length: total }, (_, i) => ({ name: 'job', payload: { i } })));

    // Killed as soon as it has a call running: the call takes 400 ms, so none of its jobs is done.
    await waitFor(() => batchesOf(a).length > 0, {
      timeoutMs: 20_000,
      intervalMs: 5,
      message: () => `worker-a to start a batch:\n${a.output()}`,
    });
    a.proc.kill('SIGKILL');
    const killedAt = Date.now();
    const inFlight = batchesOf(a).flat();
    expect(inFlight.length).toBeGreaterThan(0);
    await waitFor(() => a.exit !== null, { timeoutMs: 20_000, message: 'worker-a to exit' });

    const completed = async () =>
      (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'batched'`)).rows[0].n;
    await waitFor(async () => (await completed()) >= total, {
      timeoutMs: 60_000,
      intervalMs: 100,
      message: async () => `${total} finished jobs; now ${await completed()}\nworker-b:\n${b.output()}`,
    });

    // Once each: one history row per job, all completed, none left live.
    const rows = (
      await sql.query<{ id: string; state: string; attempt: number; locked_by: string; started_ms: number }>(
        `SELECT id::text, state, attempt, locked_by, extract(epoch FROM started_at)::float8 * 1000 AS started_ms
         FROM pgqueue.job_history WHERE queue = 'batched' ORDER BY id`,
      )
    ).rows;
    expect(rows).toHaveLength(total);
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(added.map((j) => j.id)));
    expect(rows.filter((r) => r.state !== 'completed')).toEqual([]);
    expect((await sql.query(`SELECT 1 FROM pgqueue.jobs WHERE queue = 'batched'`)).rowCount).toBe(0);

    // The jobs of the killed call: run again by worker-b, as a second attempt, once their lease
    // (renewed at most HEARTBEAT_MS before the kill) had expired.
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const id of inFlight) {
      const r = byId.get(id)!;
      expect(r.locked_by).toContain(`:${b.proc.pid}:`);
      expect(r.attempt).toBeGreaterThanOrEqual(2);
      expect(r.started_ms).toBeGreaterThanOrEqual(killedAt + LEASE_MS - HEARTBEAT_MS - 250);
    }
    // worker-b ran calls of its own too, and called none with more than batch.size jobs.
    const bCalls = batchesOf(b);
    expect(bCalls.length).toBeGreaterThan(0);
    expect(Math.max(...bCalls.map((c) => c.length))).toBeLessThanOrEqual(10);
    // No job of the killed call ran twice on worker-b.
    const onB = bCalls.flat();
    expect(onB.length).toBe(new Set(onB).size);
  }, 120_000);
});
