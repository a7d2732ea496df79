/** The reads that confirm a hint: what the database says, not what a notification said. */
export interface HintReads {
  /** The ids among `ids` whose cancellation was asked in the database. */
  cancelRequested(ids: readonly string[]): Promise<string[]>;
  isPaused(queue: string): Promise<boolean>;
}

/** What the hints act on: this process's workers. */
export interface HintTargets {
  /** The ids of the jobs this process holds (running or prefetched). */
  heldIds(): Iterable<string>;
  /** True when this process has a worker for `queue`. */
  hasQueue(queue: string): boolean;
  /** A confirmed cancel: the job ends cancelled. */
  cancel(id: string): void;
  /** A confirmed pause: the queue's prefetched jobs go back. */
  paused(queue: string): void;
  error(err: Error): void;
}

/** A job id as the cancel statement sends it: a positive bigint in decimal. */
const JOB_ID = /^[1-9][0-9]{0,18}$/;
/** Hints kept for one confirming read; past this a flood is dropped (the heartbeat reads the flag anyway). */
const MAX_PENDING_CANCELS = 10_000;

/**
 * '!cancel|id' and '!pause|queue' notifications are hints, never orders: any role that can
 * connect may NOTIFY the channel, and a spoofed '!cancel|id' aborted a running job that nobody
 * had cancelled (issue 25). A hint only starts a read of the row's `cancel_requested_at` or the
 * queue's `paused`, and the worker acts on what the database says.
 *
 * What a flood costs is bounded: cancel hints for ids this process does not hold cost no query;
 * the others are read in one statement by id, with at most one read in flight (hints arriving
 * meanwhile wait for the next batch); pause hints of a queue make at most one read in flight and
 * one after it.
 */
export class ControlHints {
  private readonly pendingCancels = new Set<string>();
  private cancelRead: Promise<void> | null = null;
  /** Per queue: a pause read in flight, and whether another hint came while it ran. */
  private readonly pauseReads = new Map<string, { again: boolean }>();
  private readonly pauseChecks = new Set<Promise<void>>();

  constructor(
    private readonly reads: HintReads,
    private readonly targets: HintTargets,
  ) {}

  /** A '!cancel|id' notification arrived. */
  cancelHint(id: string): void {
    if (!JOB_ID.test(id) || this.pendingCancels.size >= MAX_PENDING_CANCELS) return;
    this.pendingCancels.add(id);
    // The hints of one burst (one socket read) are batched: the read starts on the next turn.
    this.cancelRead ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.confirmCancels());
  }

  /** A '!pause|queue' notification arrived. */
  pauseHint(queue: string): void {
    if (!this.targets.hasQueue(queue)) return;
    const inFlight = this.pauseReads.get(queue);
    if (inFlight) {
      inFlight.again = true;
      return;
    }
    const check = this.confirmPause(queue);
    this.pauseChecks.add(check);
    void check.finally(() => this.pauseChecks.delete(check));
  }

  /** Resolves once the hints received so far are confirmed or dropped (shutdown waits for it). */
  async settled(): Promise<void> {
    while (this.cancelRead || this.pauseChecks.size > 0) await Promise.all([this.cancelRead, ...this.pauseChecks]);
  }

  private async confirmCancels(): Promise<void> {
    try {
      while (this.pendingCancels.size > 0) {
        const held = new Set(this.targets.heldIds());
        const ids = [...this.pendingCancels].filter((id) => held.has(id));
        this.pendingCancels.clear();
        if (ids.length === 0) return;
        for (const id of await this.reads.cancelRequested(ids)) this.targets.cancel(id);
      }
    } catch (err) {
      // The heartbeat reads the same flag: a cancel confirmed later is not lost.
      this.targets.error(err as Error);
    } finally {
      this.pendingCancels.clear();
      this.cancelRead = null;
    }
  }

  private async confirmPause(queue: string): Promise<void> {
    const state = { again: false };
    this.pauseReads.set(queue, state);
    try {
      do {
        state.again = false;
        if (await this.reads.isPaused(queue)) this.targets.paused(queue);
      } while (state.again);
    } catch (err) {
      this.targets.error(err as Error);
    } finally {
      this.pauseReads.delete(queue);
    }
  }
}

/** A worker as the hints see it (queue-worker.ts). */
export interface HintedWorker {
  runningIds(): string[];
  cancel(id: string): void;
  paused(): void;
}

/** The hints of a process whose workers are `workers`, by queue name. */
export function hintsForWorkers(
  reads: HintReads,
  workers: ReadonlyMap<string, HintedWorker>,
  error: (err: Error) => void,
): ControlHints {
  return new ControlHints(reads, {
    heldIds: () => [...workers.values()].flatMap((w) => w.runningIds()),
    hasQueue: (queue) => workers.has(queue),
    cancel: (id) => workers.forEach((w) => w.cancel(id)),
    paused: (queue) => workers.get(queue)?.paused(),
    error,
  });
}
