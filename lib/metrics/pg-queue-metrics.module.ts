import { Module, type DynamicModule } from '@nestjs/common';
import { register as globalRegistry } from 'prom-client';
import { PgQueueMetrics } from './pg-queue.metrics';
import {
  PG_QUEUE_METRICS_OPTIONS,
  PG_QUEUE_METRICS_REGISTRY,
  resolveMetricsOptions,
  type PgQueueMetricsOptions,
} from './pg-queue-metrics.options';

/**
 * Prometheus metrics of the queue, through `prom-client` (an optional peer: install it to use
 * this entry point). Import it next to `PgQueueModule.forRoot`; it exports {@link PgQueueMetrics}
 * and the registry (`PG_QUEUE_METRICS_REGISTRY`) for your `/metrics` route.
 * @example
 * import { PgQueueMetricsModule } from 'nestjs-pg-queue/metrics';
 * import { Registry } from 'prom-client';
 *
 * PgQueueMetricsModule.register()                                     // prom-client's global registry
 * PgQueueMetricsModule.register({ registry: new Registry(), prefix: 'shop_pgqueue_' })
 */
@Module({})
export class PgQueueMetricsModule {
  /** Registers the metrics (or reuses them, when the registry already holds them). */
  static register(options: PgQueueMetricsOptions = {}): DynamicModule {
    const { registry, ...rest } = options;
    resolveMetricsOptions(rest); // a bad option fails where the module graph is declared
    return {
      module: PgQueueMetricsModule,
      providers: [
        { provide: PG_QUEUE_METRICS_REGISTRY, useValue: registry ?? globalRegistry },
        { provide: PG_QUEUE_METRICS_OPTIONS, useValue: rest },
        PgQueueMetrics,
      ],
      exports: [PgQueueMetrics, PG_QUEUE_METRICS_REGISTRY],
    };
  }
}
