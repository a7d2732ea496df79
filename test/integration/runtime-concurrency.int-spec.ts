import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueueConfigError, Process, Processor, QueueService } from '../../lib';
import request from 'supertest';
import { PgQueueDashboardModule } from '../../lib/dashboard';
import { bootApp, runtimeOf } from '../support/app';
import { bootHttpApp } from '../support/dashboard-app';
import { useTestDatabase, waitFor } from '../support/database';

// Issue 28, point 4: QueueService.setConcurrency(queue, n) changes this node's worker at runtime
// (BullMQ: worker.concurrency = n). Every job waits on a gate the test opens, so "how many run"
// is a count of handlers inside their gate, not a matter of timing.

let running = 0;
let maxRunning = 0;
let started = 0;
const gates: (() => void)[] = [];

@Processor('conc')
class GatedProcessor {
  @Process()
  async run() {
    running++;
    started++;
    maxRunning = Math.max(maxRunning, running);
    await new Promise<void>((open) => gates.push(open));
    running--;
  }
}

function openGates(): void {
  for (const open of gates.splice(0)) open();
}

describe('setConcurrency: this node, at runtime', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  afterEach(async () => {
    openGates();
    await app?.close();
  });

  const active = async () =>
    (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'conc' AND state = 'active'`)).rows[0]
      .n as number;
  const completed = async () =>
    (await t.pool.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'conc' AND state = 'completed'`))
      .rows[0].n as number;

  it('grows without a restart, and shrinks letting running jobs finish', async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'conc', concurrency: 2 }],
      providers: [GatedProcessor],
    });
    const qs = app.get(QueueService);
    await qs.addBulk(
      'conc',
      Array.from({ length: 12 }, (_, i) => ({ name: 'x', payload: { i } })),
    );
    await waitFor(async () => running === 2 && (await active()) === 2, { timeoutMs: 20_000, message: '2 jobs running' });
    expect(qs.getConcurrency('conc')).toBe(2);

    qs.setConcurrency('conc', 5);
    expect(qs.getConcurrency('conc')).toBe(5);
    await waitFor(async () => running === 5 && (await active()) === 5, {
      timeoutMs: 20_000,
      message: '5 jobs running after growing',
    });
    expect(maxRunning).toBe(5);

    // Shrink to 1 while 5 run: they finish; from then on one job at a time.
    qs.setConcurrency('conc', 1);
    maxRunning = 0;
    const first5 = started;
    openGates();
    await waitFor(async () => (await completed()) >= 5, { timeoutMs: 20_000, message: 'the 5 running jobs to complete' });
    while ((await completed()) < 12) {
      await waitFor(async () => gates.length > 0 || (await completed()) === 12, {
        timeoutMs: 20_000,
        message: 'the next job to start',
      });
      // The other waiting jobs had every chance: the free slots of concurrency 5 would have taken them.
      expect(running).toBeLessThanOrEqual(1);
      openGates();
    }
    expect(started).toBe(12);
    expect(started - first5).toBe(7);
    expect(maxRunning).toBe(1);
  });

  it('the dashboard changes one node: stored in its registry row, confirmed by the node (hint and read)', async () => {
    const http = await bootHttpApp('express', {
      options: { connection: t.db.url, pollIntervalMs: 60_000 },
      queues: [{ name: 'conc', concurrency: 2 }],
      providers: [GatedProcessor],
      imports: [PgQueueDashboardModule.register({ public: true, countsBudget: 1 })],
    });
    app = http;
    const qs = http.get(QueueService);
    const node = runtimeOf(http).supervisor.workerId;
    const api = () => request(http.getHttpServer());
    const post = (url: string, body: unknown) =>
      api().post(url).set({ 'X-PgQueue-Dashboard': '1', 'Content-Type': 'application/json' }).send(JSON.stringify(body));
    const perNode = async () =>
      ((await api().get('/queues/api/queues/conc/concurrency')).body as { nodes: { id: string; concurrency: number }[] }).nodes;
    await waitFor(async () => (await perNode()).some((n) => n.id === node && n.concurrency === 2), {
      timeoutMs: 20_000,
      message: 'the node in the registry with concurrency 2',
    });
    await qs.addBulk(
      'conc',
      Array.from({ length: 8 }, (_, i) => ({ name: 'x', payload: { i } })),
    );
    await waitFor(async () => running === 2 && (await active()) === 2, { timeoutMs: 20_000, message: '2 jobs running' });

    const res = await post(`/queues/api/queues/conc/nodes/${encodeURIComponent(node)}/concurrency`, { concurrency: 5 });
    expect([res.status, res.body]).toEqual([200, { node, queue: 'conc', concurrency: 5 }]);
    // A poll of 60 s: the node heard the NOTIFY, read its row, and grew.
    await waitFor(async () => running === 5 && (await active()) === 5, { timeoutMs: 20_000, message: '5 jobs running' });
    expect(qs.getConcurrency('conc')).toBe(5);
    await runtimeOf(http).supervisor.heartbeat();
    expect((await perNode()).find((n) => n.id === node)?.concurrency).toBe(5);

    expect((await post('/queues/api/queues/conc/nodes/nope:1:x/concurrency', { concurrency: 3 })).status).toBe(404);
    for (const bad of [{ concurrency: 0 }, { concurrency: 1001 }, { concurrency: '3' }, {}]) {
      const r = await post(`/queues/api/queues/conc/nodes/${encodeURIComponent(node)}/concurrency`, bad);
      expect([bad, r.status]).toEqual([bad, 400]);
    }
    expect(qs.getConcurrency('conc')).toBe(5);
  });

  it('refuses a bad value, an unregistered queue, and a queue this process has no worker for', async () => {
    app = await bootApp({
      options: { connection: t.db.url, workers: false, listen: false },
      queues: [{ name: 'conc', concurrency: 2 }],
    });
    const qs = app.get(QueueService);
    for (const bad of [0, -1, 1.5, 1001, Number.NaN, '3' as unknown as number]) {
      expect(() => qs.setConcurrency('conc', bad)).toThrow(PgQueueConfigError);
    }
    expect(() => qs.setConcurrency('conc', 0)).toThrow(/is not a concurrency\. Pass a whole number from 1 to 1000/);
    expect(() => qs.setConcurrency('nope', 2)).toThrow(/queue "nope" is not registered/i);
    expect(() => qs.setConcurrency('conc', 2)).toThrow(/this process runs no worker for queue "conc"/);
    expect(qs.getConcurrency('conc')).toBeNull();
  });
});
