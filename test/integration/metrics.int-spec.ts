import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { CancelJobError, PgQueueConfigError, Process, Processor, QueueService, type Job } from '../../lib';
import { PgQueueMetrics, PgQueueMetricsModule } from '../../lib/metrics';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

@Processor('m')
class MetricsProcessor {
  @Process('ok')
  async ok() {
    await sleep(20); // the handler's own work, so its duration cannot be zero
    return 'ok';
  }

  @Process('later')
  later() {
    return 'later';
  }

  @Process('give-up')
  giveUp() {
    throw new CancelJobError('nothing to do');
  }

  @Process('flaky')
  flaky(job: Job) {
    if (job.attempt === 1) throw new Error('first attempt fails');
  }

  @Process('bad')
  bad() {
    throw new Error('always fails');
  }
}

type Labels = Record<string, string>;
type Scrape = MetricObjectWithValues<MetricValue<string>>[];

/** Sum of the samples named `sample` (a metric, or a histogram's `_count` / `_sum`) whose labels include `labels`. */
function total(scrape: Scrape, sample: string, labels: Labels = {}): number {
  let sum = 0;
  for (const metric of scrape) {
    for (const v of metric.values) {
      const name = (v as { metricName?: string }).metricName ?? metric.name;
      const vl = v.labels as Labels;
      if (name === sample && Object.entries(labels).every(([k, want]) => vl[k] === want)) sum += v.value;
    }
  }
  return sum;
}

/** Samples (series) of one metric in the scrape. */
function series(scrape: Scrape, metric: string): MetricValue<string>[] {
  return scrape.find((m) => m.name === metric)?.values ?? [];
}

const scrape = (registry: Registry) => registry.getMetricsAsJSON() as Promise<Scrape>;

describe('Prometheus metrics (nestjs-pg-queue/metrics)', () => {
  const t = useTestDatabase();

  it('counts enqueued, completed, retried, failed and stalled jobs, times handlers and waits, and reports the listener', async () => {
    const registry = new Registry();
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'metrics_events', pollIntervalMs: 100, rescueIntervalMs: 100 },
      queues: [{ name: 'm', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10 } } }],
      providers: [MetricsProcessor],
      imports: [PgQueueMetricsModule.register({ registry })],
    });
    try {
      await waitFor(async () => total(await scrape(registry), 'pgqueue_listener_connected') === 1, {
        message: 'listener_connected to be 1',
      });

      const queues = app.get(QueueService);
      await queues.addBulk('m', [
        { name: 'ok', payload: {} },
        { name: 'ok', payload: {} },
      ]);
      await queues.add('m', 'flaky', {}, { attempts: 3 });
      await queues.add('m', 'bad', {}, { attempts: 2 });
      await queues.add('m', 'give-up', {}, { attempts: 3 });
      const later = await queues.add('m', 'later', {}, { delayMs: 1000 });

      let last: Scrape = [];
      const done = (name: string) => total(last, 'pgqueue_jobs_completed_total', { queue: 'm', name });
      await waitFor(
        async () => {
          last = await scrape(registry);
          return (
            done('ok') === 2 &&
            done('flaky') === 1 &&
            done('later') === 1 &&
            total(last, 'pgqueue_jobs_failed_total', { name: 'bad' }) === 1 &&
            total(last, 'pgqueue_jobs_cancelled_total', { name: 'give-up' }) === 1 &&
            // Each attempt's duration is observed when its outcome's event fires, after the write.
            total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'failed' }) === 1 &&
            total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'completed' }) === 4
          );
        },
        {
          // 20 s: through PgBouncer on a loaded CI machine every counter was at its mark at 10 s
          // and the wait still timed out; the message now names the durations too.
          timeoutMs: 20_000,
          message: () =>
            `all jobs to finish; durations observed: failed ${total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'failed' })}, ` +
            `completed ${total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'completed' })}; ` +
            `last scrape: ${JSON.stringify(last.filter((m) => m.name.includes('_total')))}`,
        },
      );

      for (const [name, n] of [
        ['ok', 2],
        ['flaky', 1],
        ['bad', 1],
        ['later', 1],
      ] as const) {
        expect(total(last, 'pgqueue_jobs_enqueued_total', { queue: 'm', name })).toBe(n);
      }
      expect(total(last, 'pgqueue_jobs_retried_total', { queue: 'm', name: 'flaky' })).toBe(1);
      expect(total(last, 'pgqueue_jobs_retried_total', { queue: 'm', name: 'bad' })).toBe(1);
      expect(total(last, 'pgqueue_jobs_failed_total', { queue: 'm' })).toBe(1); // bad only, once
      expect(total(last, 'pgqueue_jobs_completed_total', { queue: 'm', name: 'bad' })).toBe(0);

      // One duration sample per attempt, labelled with its outcome.
      expect(total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'completed' })).toBe(4);
      expect(total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'retried' })).toBe(2);
      expect(total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'failed' })).toBe(1);
      // A cancelled job: counted once, not retried, not failed.
      expect(total(last, 'pgqueue_jobs_cancelled_total', { queue: 'm' })).toBe(1);
      expect(total(last, 'pgqueue_jobs_retried_total', { queue: 'm', name: 'give-up' })).toBe(0);
      expect(total(last, 'pgqueue_job_duration_seconds_count', { queue: 'm', outcome: 'cancelled' })).toBe(1);
      // The samples are the handlers' time (how long is for `npm run bench`): not zero, not missing.
      expect(total(last, 'pgqueue_job_duration_seconds_sum', { name: 'ok', outcome: 'completed' })).toBeGreaterThan(0);
      // One wait sample per attempt: ok 2, flaky 2, bad 2, give-up 1, later 1.
      expect(total(last, 'pgqueue_job_wait_seconds_count', { queue: 'm' })).toBe(8);
      // The delayed job was due a second after its enqueue, and waited only from then to its claim
      // (both instants as the database stamped them on the job).
      const finished = (await queues.getJob(later.id))!;
      expect(finished.runAt.getTime() - finished.createdAt.getTime()).toBe(1000);
      expect(total(last, 'pgqueue_job_wait_seconds_count', { name: 'later' })).toBe(1);
      expect(total(last, 'pgqueue_job_wait_seconds_sum', { name: 'later' })).toBeCloseTo(
        (finished.startedAt!.getTime() - finished.runAt.getTime()) / 1000,
        2,
      );

      // A dead worker's job with no attempts left: the rescuer fails it, counted as stalled and failed.
      await t.pool.query(
        `INSERT INTO metrics_events.jobs (queue, name, payload, state, attempt, max_attempts, locked_by, locked_until)
         VALUES ('m', 'ghost', '{}', 'active', 1, 1, 'dead', now() - interval '1 second')`,
      );
      await waitFor(
        async () => total((last = await scrape(registry)), 'pgqueue_jobs_stalled_total', { queue: 'm', name: 'ghost' }) === 1,
        {
          message: 'the stalled job to be counted',
        },
      );
      expect(total(last, 'pgqueue_jobs_failed_total', { queue: 'm', name: 'ghost' })).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('reads queue depth by state at scrape time, one counts query however many gauges and scrapes run at once', async () => {
    const registry = new Registry();
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'metrics_depth', workers: false },
      queues: [{ name: 'd' }, { name: 'idle' }],
      imports: [PgQueueMetricsModule.register({ registry })],
    });
    try {
      const queues = app.get(QueueService);
      await queues.addBulk(
        'd',
        [1, 2, 3].map((i) => ({ name: 'x', payload: { i } })),
      );
      await queues.add('d', 'x', {}, { delayMs: 60_000 });
      await t.pool.query(`UPDATE metrics_depth.jobs SET run_at = now() - interval '5 seconds' WHERE id = 1`);

      const counts = jest.spyOn(runtimeOf(app).store, 'counts');
      const [text, json] = await Promise.all([registry.metrics(), scrape(registry)]);
      expect(counts).toHaveBeenCalledTimes(1);

      expect(text).toContain('pgqueue_queue_jobs{queue="d",state="waiting"} 3');
      expect(text).toContain('pgqueue_queue_jobs{queue="d",state="delayed"} 1');
      for (const state of ['active', 'stalled', 'failed', 'waiting-children'])
        expect(text).toContain(`pgqueue_queue_jobs{queue="d",state="${state}"} 0`);
      expect(text).toContain('pgqueue_queue_jobs{queue="idle",state="waiting"} 0'); // registered, empty
      expect(total(json, 'pgqueue_queue_jobs', { queue: 'd', state: 'waiting' })).toBe(3);
      expect(total(json, 'pgqueue_queue_oldest_waiting_seconds', { queue: 'd' })).toBeGreaterThanOrEqual(4);
      expect(total(json, 'pgqueue_queue_oldest_waiting_seconds', { queue: 'idle' })).toBe(0);
      // A producer-only process has no listener: no series at all, rather than a false "down".
      expect(series(json, 'pgqueue_listener_connected')).toEqual([]);
      // ... and runs no worker: no node of its own.
      expect(text).toMatch(/^pgqueue_nodes 0$/m);
      expect(text).not.toMatch(/^pgqueue_listener_connected /m);

      await registry.metrics();
      expect(counts).toHaveBeenCalledTimes(2); // the next scrape reads afresh
      counts.mockRestore();
    } finally {
      await app.close();
    }
  });

  it('reports the live nodes of the registry: this worker process and another one seen lately, not one gone quiet', async () => {
    const registry = new Registry();
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'metrics_nodes', heartbeatIntervalMs: 200 },
      queues: [{ name: 'm' }],
      providers: [MetricsProcessor], // a worker: this process is a node
      imports: [PgQueueMetricsModule.register({ registry })],
    });
    try {
      const nodes = async () => total(await scrape(registry), 'pgqueue_nodes');
      await waitFor(async () => (await nodes()) === 1, { message: 'this process to show as one node' });
      await t.pool.query(
        `INSERT INTO metrics_nodes.nodes (id, host, pid, started_at, last_seen_at, heartbeat_ms)
         VALUES ('other', 'h2', 2, now(), now(), 60000), ('quiet', 'h3', 3, now(), now() - interval '4 seconds', 1000)`,
      );
      expect(await nodes()).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('counts as enqueued only the jobs an add inserted: not one whose uniqueKey found a live job, nor a replaced waiting one', async () => {
    const registry = new Registry();
    const app = await bootApp({
      options: { connection: t.db.url, schema: 'metrics_unique', workers: false },
      queues: [{ name: 'u' }],
      imports: [PgQueueMetricsModule.register({ registry })],
    });
    try {
      const queues = app.get(QueueService);
      const enqueued = async () => total(await scrape(registry), 'pgqueue_jobs_enqueued_total', { queue: 'u', name: 'j' });
      const first = await queues.add('u', 'j', { v: 1 }, { uniqueKey: 'k1', delayMs: 60_000 });
      expect(await enqueued()).toBe(1);
      const found = await queues.add('u', 'j', { v: 2 }, { uniqueKey: 'k1', delayMs: 60_000 });
      expect(found.id).toBe(first.id);
      expect(await enqueued()).toBe(1);
      const replaced = await queues.add('u', 'j', { v: 3 }, { uniqueKey: 'k1', replaceWaiting: true, delayMs: 60_000 });
      expect(replaced).toMatchObject({ id: first.id, payload: { v: 3 } });
      expect(await enqueued()).toBe(1);
      // A bulk add of one new key, one live key and one job without a key: two rows inserted.
      await queues.addBulk('u', [
        { name: 'j', payload: {}, opts: { uniqueKey: 'k2' } },
        { name: 'j', payload: {}, opts: { uniqueKey: 'k1' } },
        { name: 'j', payload: {} },
      ]);
      expect(await enqueued()).toBe(3);
      expect((await t.pool.query(`SELECT count(*)::int AS n FROM metrics_unique.jobs`)).rows[0].n).toBe(3);
    } finally {
      await app.close();
    }
  });

  it('registers twice in one registry without throwing, counts one runtime once, and lets go on close', async () => {
    const registry = new Registry();
    const boot = (schema: string) =>
      bootApp({
        options: { connection: t.db.url, schema, workers: false },
        queues: [{ name: 'x' }],
        imports: [PgQueueMetricsModule.register({ registry })],
      });
    let a: Awaited<ReturnType<typeof boot>> | undefined = await boot('metrics_a');
    let b: Awaited<ReturnType<typeof boot>> | undefined;
    try {
      const runtimeA = runtimeOf(a);
      const supervisorA = runtimeA.supervisor;
      expect(supervisorA.listenerCount('enqueued')).toBe(1);
      // The same runtime registered a second time in this registry: its events still count once.
      const again = new PgQueueMetrics(runtimeA, registry);
      again.onModuleInit();
      expect(supervisorA.listenerCount('enqueued')).toBe(1);

      b = await boot('metrics_b'); // another app, same registry
      await a.get(QueueService).add('x', 'j', {});
      await b.get(QueueService).addBulk('x', [
        { name: 'j', payload: {} },
        { name: 'j', payload: {} },
      ]);
      let json = await scrape(registry);
      expect(total(json, 'pgqueue_jobs_enqueued_total', { queue: 'x', name: 'j' })).toBe(3);
      // The gauges describe one database: the app attached last answers them...
      expect(total(json, 'pgqueue_queue_jobs', { queue: 'x', state: 'waiting' })).toBe(2);

      await b.close();
      b = undefined;
      json = await scrape(registry);
      // ...and when it closes, the one before it.
      expect(total(json, 'pgqueue_queue_jobs', { queue: 'x', state: 'waiting' })).toBe(1);

      again.onModuleDestroy();
      await a.close();
      a = undefined;
      expect(supervisorA.listenerCount('enqueued')).toBe(0);
      for (const event of ['active', 'completed', 'retrying', 'failed', 'stalled'] as const)
        expect(supervisorA.listenerCount(event)).toBe(0);
      // Nothing left to read from: a scrape still answers, with the counters and no depth series.
      json = await scrape(registry);
      expect(series(json, 'pgqueue_queue_jobs')).toEqual([]);
      expect(total(json, 'pgqueue_jobs_enqueued_total')).toBe(3);
    } finally {
      await b?.close();
      await a?.close();
    }
  });

  it('rejects a bad prefix or bucket list when the module is declared', () => {
    expect(() => PgQueueMetricsModule.register({ prefix: 'my-app_' })).toThrow(PgQueueConfigError);
    expect(() => PgQueueMetricsModule.register({ buckets: { durationSeconds: [1, 0.5] } })).toThrow(/strictly increasing/);
    expect(() => PgQueueMetricsModule.register({ buckets: { waitSeconds: [] } })).toThrow(/buckets\.waitSeconds/);
  });
});
