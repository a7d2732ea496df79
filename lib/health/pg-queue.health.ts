import { Inject, Injectable } from '@nestjs/common';
// A value import: Nest injects by this class. This file is only reached through the
// 'nestjs-pg-queue/health' entry point, so apps without Terminus never load it.
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import type { QueueCounts } from '../core/job';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { PgQueueReadApi } from '../core/read-api';
import { QueueService } from '../module/queue.service';
import type { GroupCounts } from '../core/group-counts';
import {
  evaluateHealth,
  groupChecksFor,
  HEALTH_DEFAULTS,
  validateHealthThresholds,
  type PgQueueHealthDetails,
  type PgQueueHealthThresholds,
} from './health-evaluation';

/**
 * A Terminus health indicator for the queue: `down` when the database does not answer, when the
 * LISTEN connection has been down longer than its grace period (unless poll-only), when this
 * process's workers are not running, or when a queue (or one group of a queue: `maxGroupWaitMs`)
 * exceeds a threshold. The details name each queue's figures (and each group over its limit),
 * the listener's and workers' state, and the problems.
 *
 * Import it from `nestjs-pg-queue/health` (an entry point of its own, so apps without
 * `@nestjs/terminus` still load `nestjs-pg-queue`), and provide it next to `TerminusModule`.
 *
 * @example
 * import { Controller, Get } from '@nestjs/common';
 * import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
 * import { PgQueueHealthIndicator } from 'nestjs-pg-queue/health';
 *
 * @Controller('health')
 * export class HealthController {
 *   constructor(private readonly health: HealthCheckService, private readonly pgQueue: PgQueueHealthIndicator) {}
 *
 *   @Get()
 *   @HealthCheck()
 *   check() {
 *     return this.health.check([() => this.pgQueue.isHealthy('pgqueue', { maxAvailable: 1_000, maxStalled: 0 })]);
 *   }
 * }
 *
 * // @Module({ imports: [TerminusModule], controllers: [HealthController], providers: [PgQueueHealthIndicator] })
 */
@Injectable()
export class PgQueueHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    @Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueReadApi,
    private readonly queues: QueueService,
  ) {}

  /**
   * Checks the queue: one counts query (which also proves the database answers) and one of the
   * nodes registry, the listener's and the workers' state, and the thresholds.
   * @param key the key of this check in the Terminus result. @default 'pgqueue'
   * @param thresholds limits and grace periods; see {@link PgQueueHealthThresholds}. @default {}
   * @throws PgQueueConfigError when a threshold is invalid (Terminus then answers 500, not 503)
   */
  async isHealthy<const Key extends string = 'pgqueue'>(
    key: Key = 'pgqueue' as Key,
    thresholds: PgQueueHealthThresholds = {},
  ): Promise<HealthIndicatorResult<Key, 'up' | 'down', PgQueueHealthDetails>> {
    validateHealthThresholds(thresholds);
    const indicator = this.health.check(key);
    let counts: Record<string, QueueCounts> = {};
    const groups: Record<string, GroupCounts[]> = {};
    let nodes: number | undefined;
    let database: string | null = null;
    try {
      await within(
        (async () => {
          [counts, nodes] = await Promise.all([this.queues.getCounts(), this.runtime.liveNodes()]);
          // Only queues whose oldest available job is past maxGroupWaitMs: none while healthy.
          for (const { queue } of groupChecksFor(counts, thresholds)) {
            groups[queue] = (await this.queues.getGroupCounts(queue, { top: GROUPS_NAMED, orderBy: 'oldest' })).groups;
          }
        })(),
        thresholds.timeoutMs ?? HEALTH_DEFAULTS.timeoutMs,
      );
    } catch (err) {
      // Not `instanceof Error`: errors from node:net may come from another realm (jest's sandbox).
      const message = (err as { message?: unknown } | null)?.message;
      database = `database: ${typeof message === 'string' ? message : String(err)}`;
    }
    // Every connection's: the listener down longest, and workers running only if all run.
    const verdict = evaluateHealth(
      {
        counts,
        groups,
        listener: this.runtime.listenerState,
        workersExpected: this.runtime.options.workers,
        workersRunning: this.runtime.workersRunning,
        now: Date.now(),
      },
      thresholds,
    );
    const details: PgQueueHealthDetails = database
      ? { ...verdict.details, problems: [database, ...verdict.details.problems] }
      : { ...verdict.details, nodes };
    return verdict.up && !database ? indicator.up(details) : indicator.down(details);
  }
}

/** The most groups of one queue a health check reads, and so names, for `maxGroupWaitMs` (the oldest ones). */
const GROUPS_NAMED = 10;

/** The promise's value, or a rejection once `ms` have passed (the query itself runs on). */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within timeoutMs ${ms}`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
