import type { HistoryPartitions, HistoryPassResult } from '../db/history/partitions';
import type { EngineLogger } from './logger';
import type { BackgroundService } from './service';

/**
 * The history side of the maintenance pass, on the elected node: partitions created ahead and
 * dropped past retention (lib/db/history/partitions.ts). One pass at a time per process; the
 * maintenance pass does not wait for it, so the one-time VALIDATE of a pre-version-10 history
 * (a scan of the old table) never delays the rescue of expired leases.
 */
export class HistoryUpkeep implements BackgroundService {
  private running: Promise<HistoryPassResult | null> | null = null;
  private stopped = false;

  constructor(
    private readonly partitions: HistoryPartitions,
    /** Past what age a whole partition goes: every retention of the database (QueueRetentions). */
    private readonly retention: { readonly dropAfterMs: number },
    private readonly logger: EngineLogger,
    private readonly onError: (err: Error) => void,
  ) {}

  /** Nothing of its own to start: the rescue pass runs it, on the elected node. */
  start(): void {}

  /** No pass starts from now on; resolves once the one running ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** A partition goes once all of it is past every queue's retention of both states (failed jobs live elsewhere). */
  get dropAfterMs(): number {
    return this.retention.dropAfterMs;
  }

  /** One pass, or the one already running (none once stopped). Errors are reported to `onError`, never thrown. */
  runOnce(): Promise<HistoryPassResult | null> {
    if (this.stopped) return this.running ?? Promise.resolve(null);
    this.running ??= this.partitions
      .runOnce(this.dropAfterMs)
      .then((r) => {
        if (r.converted) this.logger.log(`pg-queue history partitioning of the existing history: step ${r.converted}`);
        if (r.dropped.length) this.logger.debug?.(`pg-queue history: dropped ${r.dropped.join(', ')}`);
        if (r.created.length) this.logger.debug?.(`pg-queue history: created ${r.created.join(', ')}`);
        return r;
      })
      .catch((err: Error) => {
        this.onError(err);
        return null;
      })
      .finally(() => (this.running = null));
    return this.running;
  }
}
