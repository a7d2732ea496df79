import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { PgQueueConfigError } from '../core/errors';
import type { QueueGroupCounts } from '../core/group-counts';
import type { QueueCounts } from '../core/job';
import { registerGroupGauges } from './group-gauges';
import type { ResolvedMetricsOptions } from './pg-queue-metrics.options';

/** What the scrape-time gauges read from one queue runtime. */
export interface QueueMetricsSource {
  /** The runtime it reads: a runtime is counted once per registry, however often it is attached. */
  readonly key: object;
  /** The figures of every queue, or null when they could not be read (the gauges then go absent). */
  counts(): Promise<Record<string, QueueCounts> | null>;
  /** The LISTEN connection's state, or null when there is none (poll-only, or no workers here). */
  listenerState(): { readonly connected: boolean } | null;
  /** Live worker processes of the nodes registry, or null when it could not be read. */
  liveNodes(): Promise<number | null>;
  /** The top `top` groups of every queue with live jobs, or null when they could not be read. */
  groups(top: number): Promise<QueueGroupCounts[] | null>;
}

/** The job states `queue_jobs` reports (its `state` label), and the `QueueCounts` field of each. */
export const QUEUE_STATES = [
  ['waiting', 'waiting'],
  ['delayed', 'delayed'],
  ['active', 'active'],
  ['stalled', 'stalled'],
  ['failed', 'failed'],
  ['waiting-children', 'waitingChildren'],
  ['sleeping', 'sleeping'],
  ['waiting-signal', 'waitingSignal'],
] as const;

type JobLabels = 'queue' | 'name';

/** The metrics of one (registry, prefix), shared by every `PgQueueMetrics` registered there. */
export interface PgQueueMetricSet {
  readonly enqueued: Counter<JobLabels>;
  readonly completed: Counter<JobLabels>;
  readonly failed: Counter<JobLabels>;
  readonly cancelled: Counter<JobLabels>;
  readonly retried: Counter<JobLabels>;
  readonly stalled: Counter<JobLabels>;
  readonly outcomesDropped: Counter<JobLabels>;
  readonly duration: Histogram<JobLabels | 'outcome'>;
  readonly wait: Histogram<JobLabels>;
  /**
   * Lets `source` answer the gauges. False when a source of the same runtime is attached already:
   * the caller must then not count events either, or every job would be counted twice.
   */
  attach(source: QueueMetricsSource): boolean;
  detach(source: QueueMetricsSource): void;
}

/**
 * The sources each registry's gauges read, keyed by the `queue_jobs` gauge itself, so the list
 * lives exactly as long as the metric (a `registry.clear()` starts a new one).
 */
const sourcesOf = new WeakMap<object, Set<QueueMetricsSource>>();

/**
 * Several apps in one process may share a registry (tests, a producer and a worker context).
 * Their counters add up; for the gauges, which describe one database, the app attached last answers.
 */
function newest(sources: Set<QueueMetricsSource>): QueueMetricsSource | undefined {
  let last: QueueMetricsSource | undefined;
  for (const s of sources) last = s;
  return last;
}

function conflict(name: string): PgQueueConfigError {
  return new PgQueueConfigError(
    `Metric "${name}" is already registered in this prom-client registry by something other than ` +
      `nestjs-pg-queue's metrics (or by a second copy of the package). Give the queue metrics a prefix ` +
      `of their own, e.g. PgQueueMetricsModule.register({ prefix: 'myapp_pgqueue_' }), or a registry of their own.`,
  );
}

/** The metric of that name in `registry` if it is of the expected kind; else a new one made by `create`. */
function reuse<M>(registry: Registry, name: string, kind: abstract new (...args: never[]) => M, create: () => M): M {
  const existing: unknown = registry.getSingleMetric(name);
  if (existing === undefined) return create();
  if (!(existing instanceof kind)) throw conflict(name);
  return existing;
}

/**
 * The queue metrics in `registry`: created on first use, reused after, so registering twice in
 * one registry never throws "already registered".
 */
export function pgQueueMetricSet(registry: Registry, opts: ResolvedMetricsOptions): PgQueueMetricSet {
  const p = opts.prefix;
  const registers = [registry];
  const counter = (name: string, help: string) =>
    reuse(
      registry,
      p + name,
      Counter,
      () => new Counter<JobLabels>({ name: p + name, help, labelNames: ['queue', 'name'], registers }),
    );

  const queueJobsName = `${p}queue_jobs`;
  const anchor: unknown = registry.getSingleMetric(queueJobsName);
  const sources = anchor === undefined ? new Set<QueueMetricsSource>() : sourcesOf.get(anchor as object);
  if (!sources) throw conflict(queueJobsName);

  reuse(registry, queueJobsName, Gauge, () => {
    const g = new Gauge<'queue' | 'state'>({
      name: queueJobsName,
      help: 'Jobs per queue and state, read from the database at scrape time (failed: kept in history).',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        const counts = await newest(sources)?.counts();
        // Reset after the await, so two scrapes at once never see each other's half-written values.
        this.reset();
        for (const [queue, c] of Object.entries(counts ?? {})) {
          for (const [state, key] of QUEUE_STATES) this.set({ queue, state }, c[key]);
        }
      },
    });
    sourcesOf.set(g, sources);
    return g;
  });
  reuse(
    registry,
    `${p}queue_oldest_waiting_seconds`,
    Gauge,
    () =>
      new Gauge<'queue'>({
        name: `${p}queue_oldest_waiting_seconds`,
        help: 'Age of the oldest due, unclaimed job per queue (now - its run_at); 0 when none waits.',
        labelNames: ['queue'],
        registers,
        async collect() {
          const counts = await newest(sources)?.counts();
          this.reset();
          for (const [queue, c] of Object.entries(counts ?? {})) this.set({ queue }, (c.oldestWaitingAgeMs ?? 0) / 1000);
        },
      }),
  );
  reuse(
    registry,
    `${p}listener_connected`,
    Gauge,
    () =>
      new Gauge({
        name: `${p}listener_connected`,
        help: '1 while the LISTEN connection that wakes the workers is up, 0 while it reconnects; absent without one.',
        registers,
        collect() {
          const state = newest(sources)?.listenerState() ?? null;
          this.reset();
          // A gauge without labels resets to 0; poll-only mode must show no series, not "down".
          if (state) this.set(state.connected ? 1 : 0);
          else this.remove();
        },
      }),
  );

  reuse(
    registry,
    `${p}nodes`,
    Gauge,
    () =>
      new Gauge({
        name: `${p}nodes`,
        help: 'Worker processes (nodes) of this database seen within 3 of their heartbeats, from the nodes registry at scrape time.',
        registers,
        async collect() {
          const n = (await newest(sources)?.liveNodes()) ?? null;
          this.reset();
          if (n === null) this.remove();
          else this.set(n);
        },
      }),
  );

  if (opts.topGroups > 0) {
    registerGroupGauges(
      registry,
      p,
      () => newest(sources)?.groups(opts.topGroups),
      (name, kind, create) => reuse(registry, name, kind, create),
    );
  }

  return {
    enqueued: counter(
      'jobs_enqueued_total',
      "Jobs enqueued by this process (counted when the insert returns, so a rolled-back transaction's jobs too).",
    ),
    completed: counter('jobs_completed_total', 'Jobs whose handler succeeded in this process.'),
    failed: counter(
      'jobs_failed_total',
      "Jobs that ended failed with no attempts left: their handler threw here, or their lease expired and this node's rescuer failed them.",
    ),
    cancelled: counter(
      'jobs_cancelled_total',
      'Jobs that ended cancelled while running in this process: queue.cancel(id) reached them, or their handler threw CancelJobError.',
    ),
    retried: counter(
      'jobs_retried_total',
      'Attempts that threw (or timed out) in this process and will be retried after their backoff.',
    ),
    stalled: counter(
      'jobs_stalled_total',
      "Attempts whose lease expired (worker died or stalled), found by this node's rescuer.",
    ),
    outcomesDropped: counter(
      'outcomes_dropped_total',
      'Attempt outcomes this process wrote that matched no row: the lease was lost (the worker stalled past leaseMs), so another worker or the rescuer had the job.',
    ),
    duration: reuse(
      registry,
      `${p}job_duration_seconds`,
      Histogram,
      () =>
        new Histogram<JobLabels | 'outcome'>({
          name: `${p}job_duration_seconds`,
          help: 'Handler run time per attempt in this process; outcome is completed, retried, failed, cancelled or snoozed.',
          labelNames: ['queue', 'name', 'outcome'],
          buckets: [...opts.durationBuckets],
          registers,
        }),
    ),
    wait: reuse(
      registry,
      `${p}job_wait_seconds`,
      Histogram,
      () =>
        new Histogram<JobLabels>({
          name: `${p}job_wait_seconds`,
          help: 'From the moment an attempt was due (its run_at; enqueue time if it ran at once) to its claim, by the database clock.',
          labelNames: ['queue', 'name'],
          buckets: [...opts.waitBuckets],
          registers,
        }),
    ),
    attach(source) {
      for (const s of sources) if (s.key === source.key) return false;
      sources.add(source);
      return true;
    },
    detach(source) {
      sources.delete(source);
    },
  };
}

/**
 * Wraps `fn` so calls made while one is in flight share its promise: the two queue gauges
 * collect concurrently in one scrape, and must cost one query, not two.
 */
export function sharedInFlight<T>(fn: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | null = null;
  return () =>
    (inFlight ??= fn().finally(() => {
      inFlight = null;
    }));
}
