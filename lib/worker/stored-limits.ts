import { PeriodicService } from './service';

/** Reads a queue's stored global concurrency (db/queue-limits.ts). */
export interface StoredLimitReads {
  globalConcurrencies(queues: readonly string[]): Promise<Map<string, number>>;
}

/** A worker as the stored limits reach it (queue-worker.ts). */
export interface StoredLimitTarget {
  /** What the database holds for its queue now (null: no stored value). */
  setStoredGlobalConcurrency(n: number | null): void;
}

/**
 * Keeps every worker of this process told of its queue's stored global concurrency
 * (queue.setGlobalConcurrency): one read of all its queues at start, every `everyMs`
 * (pollIntervalMs: a poll-only node learns of a change as it learns of new jobs), and on a
 * '!limits|queue' hint. The hint is only a reason to read: any role that can connect may
 * NOTIFY, and what the worker applies is what the database says. At most one read is in flight;
 * hints that arrive meanwhile make one more after it.
 *
 * Until the first read answers, a worker claims through the limited path (claim-limited.ts),
 * which reads the stored value itself under the queue's lock: so a node that starts while a
 * value is stored never exceeds it, even before it has heard of it.
 */
export class StoredLimits extends PeriodicService {
  private inFlight: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly reads: StoredLimitReads,
    private readonly workers: ReadonlyMap<string, StoredLimitTarget>,
    everyMs: number,
    private readonly error: (err: Error) => void,
  ) {
    super(everyMs);
  }

  override start(): void {
    super.start();
    this.track(this.runOnce());
  }

  /** A '!limits|queue' notification arrived. */
  hint(queue: string): void {
    if (this.workers.has(queue)) this.track(this.runOnce());
  }

  /** Reads every queue's stored value and hands it to its worker (one read in flight at most). */
  runOnce(): Promise<void> {
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    this.inFlight = this.readAll().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  private async readAll(): Promise<void> {
    do {
      this.again = false;
      try {
        const stored = await this.reads.globalConcurrencies([...this.workers.keys()]);
        for (const [queue, w] of this.workers) w.setStoredGlobalConcurrency(stored.get(queue) ?? null);
      } catch (err) {
        // The next timer pass reads again; until then the workers keep what they last heard.
        this.error(err as Error);
        return;
      }
    } while (this.again);
  }
}
