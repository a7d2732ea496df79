import type { JobStore, NodeRow } from '../db/job-store';
import { LeaseLostError } from '../core/errors';
import type { QueueWorker } from './queue-worker';
import { PeriodicService } from './service';

/** What the heartbeat needs of its supervisor. */
export interface HeartbeatContext {
  readonly store: JobStore;
  readonly workerId: string;
  readonly leaseMs: number;
  /** This process in the nodes registry. */
  readonly nodeRow: NodeRow;
  readonly workers: ReadonlyMap<string, QueueWorker>;
  /** Ids whose outcome the completer has not written yet: their leases are renewed too. */
  pendingIds(): string[];
  error(err: Error): void;
}

/**
 * One heartbeat every `heartbeatIntervalMs` for every job this process holds, which also keeps
 * this node's row in the registry fresh (so it runs when no job does). The first beat goes at
 * start: the node shows in the registry from its start, not a heartbeat later.
 */
export class Heartbeat extends PeriodicService {
  private beat: Promise<void> | null = null;

  constructor(
    private readonly ctx: HeartbeatContext,
    everyMs: number,
  ) {
    super(everyMs);
  }

  override start(): void {
    this.track(this.runOnce());
    super.start();
  }

  /** Stops the timer; resolves once the beat in flight (timer's or not) ended. */
  override stop(): Promise<void> {
    return Promise.all([super.stop(), this.beat]).then(() => undefined);
  }

  /**
   * One beat, or the one in flight: one at a time, so `stop` (which resolves once it ended)
   * lets shutdown remove the node's row without a late beat putting it back.
   */
  runOnce(): Promise<void> {
    if (!this.beat) this.beat = this.beatOnce().finally(() => (this.beat = null));
    return this.beat;
  }

  private async beatOnce(): Promise<void> {
    const { store, workerId, leaseMs, nodeRow, workers } = this.ctx;
    const byId = new Map<string, QueueWorker>();
    for (const w of workers.values()) for (const id of w.runningIds()) byId.set(id, w);
    const ids = [...byId.keys(), ...this.ctx.pendingIds()];
    try {
      const { kept, cancel } = await store.heartbeat(ids, workerId, leaseMs, nodeRow);
      for (const [id, w] of byId) if (!kept.has(id)) w.leaseLost(id, new LeaseLostError(id));
      // The cancels whose NOTIFY this node missed (the listener was down, or poll-only mode).
      for (const id of cancel) byId.get(id)?.cancel(id);
    } catch (err) {
      this.ctx.error(err as Error);
    }
  }
}
