import type { JobStore, Outcome } from '../db/job-store';
import type { EngineLogger } from './logger';

/**
 * Writes attempt outcomes in batches. At most one write is in flight; outcomes that arrive
 * meanwhile form the next batch, so batches grow with load and an idle queue pays no delay.
 * A crash before a write only means the job runs again after its lease: at-least-once holds.
 */
export class Completer {
  private pending: Outcome[] = [];
  private inFlight: Promise<void> | null = null;
  private scheduled = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  /** Outcomes already written elsewhere (job.completeWith committed them): matching nothing is expected. */
  private readonly writtenElsewhere = new Set<string>();
  private unmatchedCount = 0;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly logger: EngineLogger,
    private readonly maxBatch = 500,
    /** After each batch is written: a slot counted by a global limit may have freed. */
    private readonly onWritten: () => void = () => undefined,
  ) {}

  /** Ids whose outcome is not yet written: their leases must still be renewed. */
  pendingIds(): string[] {
    return this.pending.map((o) => o.id);
  }

  /**
   * Outcomes whose write matched no row: the job was no longer this worker's attempt (its lease
   * was lost and another worker owns it, or it was removed), so the guard refused to write it.
   */
  get unmatched(): number {
    return this.unmatchedCount;
  }

  /** `completedInTransaction`: job.completeWith already wrote it, so a write that matches nothing is expected. */
  push(outcome: Outcome, completedInTransaction = false): void {
    if (completedInTransaction) this.writtenElsewhere.add(outcome.id);
    this.pending.push(outcome);
    if (!this.scheduled && !this.inFlight && !this.retryTimer) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.flush();
      });
    }
  }

  private flush(): Promise<void> {
    if (this.inFlight || this.pending.length === 0) return this.inFlight ?? Promise.resolve();
    const batch = this.pending.splice(0, this.maxBatch);
    this.inFlight = this.store
      .settle(batch, this.workerId)
      .then(
        (written) => {
          this.failures = 0;
          this.countUnmatched(batch, written);
          this.onWritten();
        },
        (err: Error) => {
          // Keep the outcomes and try again: the database may be restarting. Until they are
          // written the heartbeat keeps renewing these jobs' leases.
          this.pending.unshift(...batch);
          this.failures++;
          this.logger.warn(`Writing ${batch.length} job outcome(s) failed (${err.message}); retrying`);
        },
      )
      .finally(() => {
        this.inFlight = null;
        if (this.pending.length === 0) return;
        if (this.failures === 0) {
          void this.flush();
        } else {
          const delay = Math.min(5000, 50 * 2 ** Math.min(this.failures, 7));
          this.retryTimer = setTimeout(() => {
            this.retryTimer = null;
            void this.flush();
          }, delay);
        }
      });
    return this.inFlight;
  }

  private countUnmatched(batch: readonly Outcome[], written: ReadonlySet<string>): void {
    const refused: string[] = [];
    for (const o of batch) {
      if (!written.has(o.id) && !this.writtenElsewhere.has(o.id)) refused.push(o.id);
      this.writtenElsewhere.delete(o.id);
    }
    if (refused.length === 0) return;
    this.unmatchedCount += refused.length;
    const shown = refused.slice(0, 10).join(', ') + (refused.length > 10 ? ', ...' : '');
    this.logger.warn(
      `${refused.length} job outcome(s) not written: the attempt is no longer this worker's (lease lost to another ` +
        `worker, or the job was removed): ${shown}`,
    );
  }

  /** Writes everything pending; gives up after `deadline` (epoch ms) and returns what is left. */
  async drain(deadline: number): Promise<number> {
    while ((this.pending.length || this.inFlight) && Date.now() < deadline) {
      if (this.retryTimer) {
        clearTimeout(this.retryTimer);
        this.retryTimer = null;
      }
      await (this.inFlight ?? this.flush());
      if (this.failures > 0 && this.pending.length) await new Promise((r) => setTimeout(r, 100));
    }
    return this.pending.length;
  }
}
