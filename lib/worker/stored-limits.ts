import { PeriodicService } from './service';

/** Reads the queues' stored global concurrency and what the dashboard asked of this node (db/queue-limits.ts). */
export interface StoredLimitReads {
  limitsOfNode(
    queues: readonly string[],
    workerId: string,
  ): Promise<{ global: Map<string, number>; desired: Map<string, number> }>;
}

/** A worker as the stored limits reach it (queue-worker.ts). */
export interface StoredLimitTarget {
  /** What the database holds for its queue now (null: no stored value). */
  setStoredGlobalConcurrency(n: number | null): void;
}

/**
 * Keeps every worker of this process told of its queue's stored global concurrency
 * (queue.setGlobalConcurrency), and applies a concurrency the dashboard asked of this node (its
 * nodes row, migration 0015): one read of both at start, every `everyMs`
 * (pollIntervalMs: a poll-only node learns of a change as it learns of new jobs), and on a
 * '!limits|queue' hint. The hint is only a reason to read: any role that can connect may
 * NOTIFY, and what the worker applies is what the database says. At most one read is in flight;
 * hints that arrive meanwhile make one more after it.
 *
 * The supervisor sends the workers' first claim once the first read answered (`firstRead`).
 * Until then any claim (the poll's, when that read fails or hangs) goes through the limited path
 * (claim-limited.ts), which reads the stored value itself under the queue's lock: so a node that
 * starts while a value is stored never exceeds it, even before it has heard of it.
 */
export class StoredLimits extends PeriodicService {
  private inFlight: Promise<void> | null = null;
  private again = false;
  /** The concurrency asked of this node per queue at the last read: a value is applied when it changes. */
  private readonly desiredSeen = new Map<string, number>();

  constructor(
    private readonly reads: StoredLimitReads,
    private readonly workers: ReadonlyMap<string, StoredLimitTarget>,
    everyMs: number,
    private readonly error: (err: Error) => void,
    /** This node's id in the registry, and how to change its concurrency of a queue (Supervisor.setConcurrency). */
    private readonly node: { readonly workerId: string; setConcurrency(queue: string, n: number): void },
  ) {
    super(everyMs);
  }

  /** The read `start` began: resolves once it answered or failed (never rejects). */
  firstRead: Promise<void> = Promise.resolve();

  override start(): void {
    super.start();
    this.firstRead = this.runOnce();
    this.track(this.firstRead);
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
        const { global, desired } = await this.reads.limitsOfNode([...this.workers.keys()], this.node.workerId);
        for (const [queue, w] of this.workers) {
          w.setStoredGlobalConcurrency(global.get(queue) ?? null);
          // Only a change: a setConcurrency() made in code since is not undone by every read.
          const n = desired.get(queue);
          if (n !== undefined && n !== this.desiredSeen.get(queue)) this.node.setConcurrency(queue, n);
          if (n !== undefined) this.desiredSeen.set(queue, n);
        }
      } catch (err) {
        // The next timer pass reads again; until then the workers keep what they last heard.
        this.error(err as Error);
        return;
      }
    } while (this.again);
  }
}
