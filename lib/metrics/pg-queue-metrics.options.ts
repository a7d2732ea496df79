import type { Registry } from 'prom-client';
import { PgQueueConfigError } from '../core/errors';

/** DI token of the prom-client `Registry` the queue metrics are registered in. */
export const PG_QUEUE_METRICS_REGISTRY = Symbol('PG_QUEUE_METRICS_REGISTRY');
/** DI token of the {@link PgQueueMetricsOptions} (without `registry`) given to `register`. */
export const PG_QUEUE_METRICS_OPTIONS = Symbol('PG_QUEUE_METRICS_OPTIONS');

/** Options of `PgQueueMetricsModule.register`. */
export interface PgQueueMetricsOptions {
  /**
   * The registry to register the metrics in, and the one your `/metrics` route serves.
   * @default prom-client's global `register`
   */
  registry?: Registry;
  /** Put before every metric name. Letters, digits, `_` and `:`; may be empty. @default 'pgqueue_' */
  prefix?: string;
  /**
   * Histogram bucket upper bounds, in seconds (Prometheus' base unit), strictly increasing.
   * When a registry already holds these histograms (a second registration), its buckets stay.
   * @default {} (each histogram's own default, below)
   */
  buckets?: {
    /** Of `job_duration_seconds`. @default 5 ms to 10 min: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600] */
    durationSeconds?: readonly number[];
    /** Of `job_wait_seconds`. @default 5 ms to 1 h: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600] */
    waitSeconds?: readonly number[];
  };
  /**
   * Per-group gauges (`group_jobs`, `group_oldest_waiting_seconds`) for each queue's `top`
   * busiest groups (active + waiting jobs), the rest summed under `group="__other__"`: at most
   * `top + 1` groups per queue, however many tenants. One bounded read per queue with live jobs
   * per scrape; `false` reads nothing and reports no group series. `top`: 1 to 100.
   * @default { top: 10 }
   */
  groups?: { top?: number } | false;
}

/** What the metrics see: every option defaulted and checked. @internal */
export interface ResolvedMetricsOptions {
  readonly prefix: string;
  readonly durationBuckets: readonly number[];
  readonly waitBuckets: readonly number[];
  /** How many groups per queue get their own series; 0: no group gauges. */
  readonly topGroups: number;
}

/**
 * The defaults. Handlers woken by LISTEN start within milliseconds, and a poll-only queue within
 * `pollIntervalMs` (2 s), so both histograms start at 5 ms; they end at 10 min (a long handler)
 * and 1 h (a backlog someone should already have been paged for).
 */
export const METRICS_DEFAULTS = Object.freeze({
  prefix: 'pgqueue_',
  durationBuckets: Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]),
  waitBuckets: Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600]),
  topGroups: 10,
});

function checkGroups(value: PgQueueMetricsOptions['groups']): number {
  if (value === false) return 0;
  const top = value === undefined ? METRICS_DEFAULTS.topGroups : typeof value === 'object' && value !== null ? value.top : NaN;
  const n = top ?? METRICS_DEFAULTS.topGroups;
  if (!Number.isInteger(n) || n < 1 || n > 100) {
    throw new PgQueueConfigError(
      `PgQueueMetricsModule: groups must be { top: n } with n a whole number from 1 to 100 (the groups per queue with ` +
        `series of their own), or false for no group gauges; got ${JSON.stringify(value)}.`,
    );
  }
  return n;
}

function checkBuckets(option: string, value: readonly number[] | undefined, fallback: readonly number[]): readonly number[] {
  if (value === undefined) return fallback;
  const ok =
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((b, i) => typeof b === 'number' && Number.isFinite(b) && b > 0 && (i === 0 || b > value[i - 1]));
  if (!ok) {
    throw new PgQueueConfigError(
      `PgQueueMetricsModule: ${option} must be a non-empty array of positive, finite, strictly increasing ` +
        `numbers of seconds (e.g. [0.01, 0.1, 1, 10]); got ${JSON.stringify(value)}.`,
    );
  }
  return Object.freeze([...value]);
}

/** Defaults and validates the options once, so a bad value fails the boot with what to change. @internal */
export function resolveMetricsOptions(options: Omit<PgQueueMetricsOptions, 'registry'> = {}): ResolvedMetricsOptions {
  const prefix = options.prefix ?? METRICS_DEFAULTS.prefix;
  if (typeof prefix !== 'string' || !/^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/.test(prefix)) {
    throw new PgQueueConfigError(
      `PgQueueMetricsModule: prefix must start with a letter, '_' or ':' and hold only letters, digits, '_' and ':' ` +
        `(Prometheus metric names), e.g. 'myapp_pgqueue_'; got ${JSON.stringify(prefix)}.`,
    );
  }
  return {
    prefix,
    durationBuckets: checkBuckets('buckets.durationSeconds', options.buckets?.durationSeconds, METRICS_DEFAULTS.durationBuckets),
    waitBuckets: checkBuckets('buckets.waitSeconds', options.buckets?.waitSeconds, METRICS_DEFAULTS.waitBuckets),
    topGroups: checkGroups(options.groups),
  };
}
