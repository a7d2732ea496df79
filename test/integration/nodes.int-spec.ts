import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Pool } from 'pg';
import request from 'supertest';
import { Process, Processor, QueueService, type ActiveJob } from '../../lib';
import { PgQueueDashboardModule } from '../../lib/dashboard';
import { DashboardStore } from '../../lib/db/dashboard-store';
import { bootApp, runtimeOf } from '../support/app';
import { assertBuilt } from '../support/built';
import { bootHttpApp } from '../support/dashboard-app';
import { createTestDatabase, testPool, waitFor, type TestDatabase } from '../support/database';

// The nodes registry: every worker process upserts its row with its heartbeat, deletes it on a
// clean shutdown, and the maintenance pass drops the row of a node that died. Also the worker
// recorded in history (locked_by) and in each attempt's error, which the job page shows.

const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'worker-process.js');
const OPTS = { leaseMs: 3000, heartbeatIntervalMs: 200, rescueIntervalMs: 200, pollIntervalMs: 200 };

const gates: (() => void)[] = [];

@Processor('nodes')
class NodesProcessor {
  @Process('hold')
  hold() {
    return new Promise<void>((resolve) => gates.push(resolve));
  }

  @Process('flaky')
  flaky(job: ActiveJob) {
    if (job.attempt === 1) throw new Error('first attempt fails');
    return 'ok';
  }
}

describe('nodes registry', () => {
  let db: TestDatabase;
  let sql: Pool;
  let store: DashboardStore;
  const children: ChildProcess[] = [];
  // Closed after the file even when a test failed midway (close() twice is a no-op).
  const apps: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    sql = testPool(db.url, 2);
  });
  afterAll(async () => {
    gates.splice(0).forEach((g) => g());
    for (const a of apps) await a.close();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await sql?.end();
    await db?.drop();
  });

  const rows = async () => (await sql.query<{ id: string; pid: number }>('SELECT id, pid FROM pgqueue.nodes ORDER BY id')).rows;

  it('a worker process appears with its host, pid and queues, counts its running jobs, and leaves on shutdown', async () => {
    // No maintenance pass during this test (it would delete a stale row, and the next heartbeat
    // insert a new one): only the heartbeat's upsert can move last_seen_at here.
    const app = await bootApp({
      options: { connection: db.url, ...OPTS, rescueIntervalMs: 600_000 },
      queues: [{ name: 'nodes', concurrency: 3 }],
      providers: [NodesProcessor],
    });
    apps.push(app);
    await app.init();
    const workerId = runtimeOf(app).supervisor.workerId;
    store = new DashboardStore(runtimeOf(app).pool, 'pgqueue', 'pgqueue_jobs');
    await waitFor(async () => (await store.nodes()).some((n) => n.id === workerId), { message: 'the node to register' });
    const [me] = (await store.nodes()).filter((n) => n.id === workerId);
    expect(me).toMatchObject({ pid: process.pid, queues: [{ name: 'nodes', concurrency: 3 }], running: 0, heartbeatMs: 200 });
    expect(me.host.length).toBeGreaterThan(0);
    // Its heartbeat keeps it fresh while idle (no job to renew).
    const seen = me.lastSeenAt.getTime();
    await waitFor(async () => (await store.nodes()).some((n) => n.id === workerId && n.lastSeenAt.getTime() > seen), {
      message: 'last_seen_at to move',
    });

    await app.get(QueueService).add('nodes', 'hold', {});
    await app.get(QueueService).add('nodes', 'hold', {});
    await waitFor(async () => (await store.nodes()).find((n) => n.id === workerId)?.running === 2, {
      message: async () => `running = 2; nodes: ${JSON.stringify(await store.nodes())}`,
    });
    // Both handlers must be holding their gate: a claimed job counts as running before its
    // handler has reached the gate, and a gate released before that would leave it waiting.
    await waitFor(() => gates.length === 2, { message: () => `both handlers at their gate; ${gates.length} are` });
    gates.splice(0).forEach((g) => g());
    await waitFor(async () => (await store.nodes()).find((n) => n.id === workerId)?.running === 0, {
      timeoutMs: 15_000,
      message: async () => `running = 0; nodes: ${JSON.stringify(await store.nodes())}`,
    });

    await app.close();
    expect(await rows()).toEqual([]);
  });

  it('the worker of each attempt is recorded: in the error of a failed attempt, and in history for the last', async () => {
    const app = await bootApp({
      options: { connection: db.url, ...OPTS },
      queues: [{ name: 'nodes', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10, jitter: false } } }],
      providers: [NodesProcessor],
    });
    apps.push(app);
    await app.init();
    const workerId = runtimeOf(app).supervisor.workerId;
    const job = await app.get(QueueService).add('nodes', 'flaky', {});
    await waitFor(async () => (await app.get(QueueService).getJob(job.id))?.state === 'completed', { timeoutMs: 10_000 });
    const {
      rows: [h],
    } = await sql.query('SELECT locked_by, errors FROM pgqueue.job_history WHERE id = $1', [job.id]);
    expect(h.locked_by).toBe(workerId);
    expect(h.errors).toHaveLength(1);
    expect(h.errors[0]).toMatchObject({ attempt: 1, message: 'first attempt fails', worker: workerId });
    await app.close();
  });

  it('a node counts as live while seen within 3 of its heartbeat intervals', async () => {
    await sql.query(
      `INSERT INTO pgqueue.nodes (id, host, pid, started_at, last_seen_at, heartbeat_ms, queues) VALUES
         ('fresh', 'h', 1, now(), now() - interval '1 second', 1000, '[]'),
         ('stale', 'h', 2, now(), now() - interval '4 seconds', 1000, '[]')`,
    );
    const live = (await new DashboardStore(sql, 'pgqueue', 'pgqueue_jobs').nodes()).map((n) => n.id);
    expect(live).toContain('fresh');
    expect(live).not.toContain('stale');
    await sql.query(`DELETE FROM pgqueue.nodes WHERE id IN ('fresh', 'stale')`);
  });

  it('a killed node drops off the live list within a few heartbeats, and maintenance deletes its row', async () => {
    assertBuilt();
    // A node with the dashboard (and the maintenance pass) that outlives the killed one.
    const watcher: INestApplication = await bootHttpApp('express', {
      options: { connection: db.url, ...OPTS },
      queues: [{ name: 'other' }],
      imports: [PgQueueDashboardModule.register({ public: true })],
    });
    try {
      const child = spawn(process.execPath, [FIXTURE], {
        cwd: ROOT,
        env: {
          ...process.env,
          DB_URL: db.url,
          PGQ_CONCURRENCY: '2',
          PGQ_HEARTBEAT_MS: '200',
          PGQ_LEASE_MS: '3000',
          PGQ_RESCUE_MS: '200',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let out = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (out += d));
      const apiNodes = async () =>
        (await request(watcher.getHttpServer()).get('/queues/api/nodes')).body.nodes as {
          pid: number;
          queues: unknown;
          running: number;
        }[];
      await waitFor(async () => (await apiNodes()).some((n) => n.pid === child.pid), {
        timeoutMs: 20_000,
        message: () => `the child to register; output: ${out}`,
      });
      expect((await apiNodes()).find((n) => n.pid === child.pid)).toMatchObject({
        queues: [{ name: 'work', concurrency: 2 }],
        running: 0,
      });
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      // Live: seen within 3 heartbeats. Its row is still there until maintenance drops it.
      await waitFor(async () => !(await apiNodes()).some((n) => n.pid === child.pid), {
        timeoutMs: 10_000,
        message: 'the dead node to leave the live list',
      });
      await waitFor(async () => !(await rows()).some((r) => r.pid === child.pid), {
        timeoutMs: 15_000,
        message: 'maintenance to delete the dead node',
      });
    } finally {
      await watcher.close();
    }
  });
});
