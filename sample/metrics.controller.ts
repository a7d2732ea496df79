import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
// An installed app imports this from 'nestjs-pg-queue/metrics'.
import { PG_QUEUE_METRICS_REGISTRY } from '../lib/metrics';

/** `GET /metrics`: the registry the queue metrics live in, in Prometheus' text format. */
@Controller('metrics')
export class MetricsController {
  constructor(@Inject(PG_QUEUE_METRICS_REGISTRY) private readonly registry: Registry) {}

  @Get()
  async scrape(@Res({ passthrough: true }) res: ServerResponse): Promise<string> {
    res.setHeader('Content-Type', this.registry.contentType);
    return this.registry.metrics();
  }
}
