import type { JobStore, StalledJob } from '../db/job-store';
import type { ResolvedPgQueueOptions } from '../core/options/resolved';
import type { HistoryUpkeep } from './history-upkeep';
import type { EngineLogger } from './logger';
import { PeriodicService } from './service';
import type { JobsTableVacuum } from './vacuum';

/** What the rescue pass needs of its supervisor. */
export interface RescueContext {
  readonly store: JobStore;
  readonly opts: Pick<ResolvedPgQueueOptions, 'rescueIntervalMs' | 'logJobFailures'>;
  readonly logger: EngineLogger;
  readonly history: HistoryUpkeep;
  readonly vacuum: JobsTableVacuum;
  stalled(job: StalledJob): void;
  error(err: Error): void;
}

/**
 * The maintenance pass, every `rescueIntervalMs`: if this node wins the election, rescue expired
 * leases and prune, then history upkeep and the vacuum.
 */
export class Rescuer extends PeriodicService {
  constructor(private readonly ctx: RescueContext) {
    super(ctx.opts.rescueIntervalMs);
  }

  /** One pass; reports its errors, never rejects. */
  async runOnce(): Promise<void> {
    const { store, history, vacuum, logger, opts } = this.ctx;
    try {
      const r = await store.maintain(1000);
      // Not awaited (see HistoryUpkeep): it keeps its own pass, which shutdown waits for. None
      // starts once shutdown began (history.stop()): shutdown waits only for the one running then.
      if (r) void history.runOnce();
      if (r) await vacuum.runOnce();
      if (r && r.stalled.length) {
        for (const j of r.stalled) {
          if (opts.logJobFailures !== 'none') {
            logger.error(
              `Job ${j.id} (${j.queue}/${j.name}) attempt ${j.attempt}: lease expired (its worker died, was killed, or stalled ` +
                `longer than leaseMs); ${j.willRetry ? 'back in the queue' : 'failed: no attempts left'}`,
            );
          }
          this.ctx.stalled(j);
        }
      }
    } catch (err) {
      this.ctx.error(err as Error);
    }
  }
}
