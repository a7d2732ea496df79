import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
// An installed app imports these from 'nestjs-pg-queue/health'.
import { PgQueueHealthIndicator, type PgQueueHealthThresholds } from '../lib/health';

/**
 * `GET /health`: 200 `{"status":"ok", ...}` while the queue is healthy, 503 with the problems
 * when it is not (database unreachable, LISTEN down past its grace, workers stopped, a limit
 * exceeded). The details show every queue's figures.
 */
@Controller('health')
export class HealthController {
  // Generous limits: past these, something is wrong, not just busy. Every limit applies to each
  // queue; `queues: { name: {...} }` would set one queue's own.
  private readonly thresholds: PgQueueHealthThresholds = {
    maxAvailable: 1_000,
    maxOldestAvailableAgeMs: 5 * 60_000,
    maxStalled: 10,
    // The e2e test shortens it to see the listener's outage within a second.
    listenerGraceMs: Number(process.env.HEALTH_LISTENER_GRACE_MS ?? 30_000),
  };

  constructor(
    private readonly health: HealthCheckService,
    private readonly pgQueue: PgQueueHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.pgQueue.isHealthy('pgqueue', this.thresholds)]);
  }
}
