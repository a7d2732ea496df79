import { Inject, Injectable, Logger, Optional, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { register as globalRegistry, type Registry } from 'prom-client';
import type { StalledJob, SupervisorEventMap } from '../core/events';
import type { QueueGroupCounts } from '../core/group-counts';
import type { Job } from '../core/job';
import type { PgQueueReadApi } from '../core/read-api';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { PgQueueRuntime } from '../module/pg-queue.runtime';
import { QueueService } from '../module/queue.service';
import { pgQueueMetricSet, sharedInFlight, type PgQueueMetricSet, type QueueMetricsSource } from './metric-set';
import {
  PG_QUEUE_METRICS_OPTIONS,
  PG_QUEUE_METRICS_REGISTRY,
  resolveMetricsOptions,
  type PgQueueMetricsOptions,
} from './pg-queue-metrics.options';

type Outcome = 'completed' | 'retried' | 'failed' | 'cancelled' | 'snoozed';

/**
 * Prometheus metrics of the queue: counts the supervisor's job events as they happen, and reads
 * queue depth and the listener's state when the registry is scraped. Provided by
 * `PgQueueMetricsModule.register()`; serve its `registry` at `/metrics`.
 *
 * Counters and histograms describe this process (sum them across instances); the `queue_jobs`,
 * `queue_oldest_waiting_seconds` and `group_*` gauges describe the whole database (every instance
 * reports the same values: aggregate them with `max`, not `sum`).
 * @example
 * @Controller('metrics')
 * export class MetricsController {
 *   constructor(private readonly metrics: PgQueueMetrics) {}
 *
 *   @Get()
 *   async scrape(@Res({ passthrough: true }) res: Response): Promise<string> {
 *     res.setHeader('Content-Type', this.metrics.registry.contentType);
 *     return this.metrics.registry.metrics();
 *   }
 * }
 */
@Injectable()
export class PgQueueMetrics implements OnModuleInit, OnModuleDestroy {
  /** The registry the metrics are registered in. */
  readonly registry: Registry;
  private readonly metrics: PgQueueMetricSet;
  private readonly source: QueueMetricsSource;
  /** Whether this instance counts its runtime's events (false when another one already does). */
  private attached = false;
  /** `performance.now()` at each running attempt's start, by job id, for the duration histogram. */
  private readonly startedAt = new Map<string, number>();
  private readonly logger = new Logger('PgQueueMetrics');
  /** What this class reads of the runtime (the whole runtime goes only to QueueService). */
  private readonly runtime: PgQueueReadApi;

  constructor(
    @Inject(PG_QUEUE_RUNTIME) runtime: PgQueueRuntime,
    @Optional() @Inject(PG_QUEUE_METRICS_REGISTRY) registry?: Registry,
    @Optional() @Inject(PG_QUEUE_METRICS_OPTIONS) options?: Omit<PgQueueMetricsOptions, 'registry'>,
  ) {
    this.runtime = runtime;
    this.registry = registry ?? globalRegistry;
    this.metrics = pgQueueMetricSet(this.registry, resolveMetricsOptions(options));
    const queues = new QueueService(runtime);
    this.source = {
      key: runtime,
      counts: sharedInFlight(() =>
        queues.getCounts().catch((err: Error) => {
          // A database outage must not fail the whole scrape (the app's other metrics, and these
          // counters, matter most then): the depth gauges go absent until the database answers.
          this.logger.warn(`Queue depth not reported in this scrape: reading the counts failed (${err.message})`);
          return null;
        }),
      ),
      listenerState: () => runtime.listenerState,
      groups: sharedTop((top) => this.readGroups(queues, top)),
      liveNodes: sharedInFlight(() =>
        runtime.liveNodes().catch((err: Error) => {
          this.logger.warn(`Node count not reported in this scrape: reading the nodes registry failed (${err.message})`);
          return null;
        }),
      ),
    };
  }

  /**
   * The top groups of every queue with live jobs (the shared counts say which), one bounded read
   * per queue, one after the other (each holds one connection of the pool the workers share).
   * Null when the counts could not be read; a queue whose read fails is left out, and logged.
   */
  private async readGroups(queues: QueueService, top: number): Promise<QueueGroupCounts[] | null> {
    const counts = await this.source.counts();
    if (!counts) return null;
    const out: QueueGroupCounts[] = [];
    for (const [queue, c] of Object.entries(counts)) {
      if (c.waiting + c.active === 0) continue;
      try {
        const g = await queues.getGroupCounts(queue, { top });
        if (g.groups.length > 0 || g.other.groups > 0) out.push(g);
      } catch (err) {
        this.logger.warn(
          `Groups of queue "${queue}" not reported in this scrape: reading them failed (${(err as Error).message})`,
        );
      }
    }
    return out;
  }

  /** Every supervisor event this class listens to, so subscribing and unsubscribing cannot drift apart. */
  private subscriptions(): [keyof SupervisorEventMap, (...args: never[]) => void][] {
    // (Listed untyped: EventEmitter's per-event typing cannot follow a loop; each handler below
    // is typed against its event.)
    return [
      ['enqueued', this.onEnqueued],
      ['active', this.onActive],
      ['completed', this.onCompleted],
      ['retrying', this.onRetrying],
      ['failed', this.onFailed],
      ['stalled', this.onStalled],
      ['cancelled', this.onCancelled],
      ['snoozed', this.onSnoozed],
      ['outcomeDropped', this.onOutcomeDropped],
    ];
  }

  onModuleInit(): void {
    if (this.attached) return;
    // The same runtime registered twice in one registry (the module imported twice) counts once.
    this.attached = this.metrics.attach(this.source);
    if (!this.attached) return;
    // Every database's supervisor reports the events of its own queues.
    for (const c of this.runtime.connections) {
      for (const [event, listener] of this.subscriptions()) c.supervisor.on(event, listener as (...args: unknown[]) => void);
    }
  }

  onModuleDestroy(): void {
    if (!this.attached) return;
    this.attached = false;
    this.metrics.detach(this.source);
    for (const c of this.runtime.connections) {
      for (const [event, listener] of this.subscriptions()) c.supervisor.off(event, listener as (...args: unknown[]) => void);
    }
    this.startedAt.clear();
  }

  private readonly onEnqueued = (queue: string, name: string, count: number): void => {
    this.metrics.enqueued.inc({ queue, name }, count);
  };

  private readonly onActive = (job: Job): void => {
    this.startedAt.set(startKey(job), performance.now());
    if (!job.startedAt) return;
    // Due since run_at: a delayed job or a retry's backoff is not waiting time. Both instants come
    // from the database clock, so no clock skew enters. max() with createdAt covers a run_at
    // given in the past.
    const dueAt = Math.max(job.runAt.getTime(), job.createdAt.getTime());
    this.metrics.wait.observe({ queue: job.queue, name: job.name }, Math.max(0, job.startedAt.getTime() - dueAt) / 1000);
  };

  private readonly onCompleted = (job: Job): void => {
    this.metrics.completed.inc({ queue: job.queue, name: job.name });
    this.observeDuration(job, 'completed');
  };

  private readonly onRetrying = (job: Job): void => {
    this.metrics.retried.inc({ queue: job.queue, name: job.name });
    this.observeDuration(job, 'retried');
  };

  private readonly onFailed = (job: Job): void => {
    this.metrics.failed.inc({ queue: job.queue, name: job.name });
    this.observeDuration(job, 'failed');
  };

  private readonly onCancelled = (job: Job): void => {
    this.metrics.cancelled.inc({ queue: job.queue, name: job.name });
    this.observeDuration(job, 'cancelled');
  };

  private readonly onSnoozed = (job: Job): void => this.observeDuration(job, 'snoozed');

  /** The attempt ran here but its outcome changed nothing: its duration is not observed. */
  private readonly onOutcomeDropped = (job: Job): void => {
    this.metrics.outcomesDropped.inc({ queue: job.queue, name: job.name });
    this.startedAt.delete(startKey(job));
  };

  private readonly onStalled = (job: StalledJob): void => {
    this.metrics.stalled.inc({ queue: job.queue, name: job.name });
    if (!job.willRetry) this.metrics.failed.inc({ queue: job.queue, name: job.name });
  };

  private observeDuration(job: Job, outcome: Outcome): void {
    const started = this.startedAt.get(startKey(job));
    // No start seen: the attempt began before these metrics were attached.
    if (started === undefined) return;
    this.startedAt.delete(startKey(job));
    this.metrics.duration.observe({ queue: job.queue, name: job.name, outcome }, (performance.now() - started) / 1000);
  }
}

/** sharedInFlight for a read that takes the number of groups (always the same one for a given metric set). */
function sharedTop<T>(fn: (top: number) => Promise<T>): (top: number) => Promise<T> {
  const byTop = new Map<number, () => Promise<T>>();
  return (top) => {
    let f = byTop.get(top);
    if (!f) byTop.set(top, (f = sharedInFlight(() => fn(top))));
    return f();
  };
}

/** A job's key in `startedAt`: ids are per database, queue names per app. */
function startKey(job: Job): string {
  return `${job.queue}\u0000${job.id}`;
}
