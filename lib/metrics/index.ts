// The `nestjs-pg-queue/metrics` entry point. The only part of the package that imports
// prom-client, so apps without it never load it.
import './peer'; // first: names prom-client if it is missing
export { PgQueueMetricsModule } from './pg-queue-metrics.module';
export { PgQueueMetrics } from './pg-queue.metrics';
export {
  PG_QUEUE_METRICS_REGISTRY,
  PG_QUEUE_METRICS_OPTIONS,
  METRICS_DEFAULTS,
  type PgQueueMetricsOptions,
} from './pg-queue-metrics.options';
