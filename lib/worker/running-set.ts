import type { ResolvedBackoff } from '../core/options/resolved';
import type { RunningJob } from './active-job';
import type { JobSpan } from './job-span';
import type { AttemptFacts } from './outcome';

/** One attempt this worker runs, from its start until it settles (one object per job). */
export class Attempt implements AttemptFacts {
  /** The attempt's timeout. */
  timer: NodeJS.Timeout | null = null;
  settled = false;
  /** queue.cancel(id) reached it: unless the handler completes anyway, it ends cancelled. */
  cancelRequested = false;
  /** completeWith() wrote the completion in the handler's transaction: no outcome is left to write. */
  completedInTransaction = false;
  /** completeWith() was called (it may be called once per attempt). */
  completeCalled = false;
  readonly startedAt = performance.now();
  /** The handler's OpenTelemetry span; null unless an SDK records spans. */
  span: JobSpan | null = null;

  constructor(
    readonly job: RunningJob,
    readonly backoff: ResolvedBackoff,
    /** The claim's started_at in epoch ms (AttemptFacts.claimedAtMs). */
    readonly claimedAtMs: number | null,
  ) {}
}

/**
 * The attempts a worker runs, and those settled whose last progress is still being written
 * before their outcome is handed on (their leases are still renewed, as the completer's pending
 * outcomes are). Idle when both are empty.
 */
export class RunningSet {
  private readonly byId = new Map<string, Attempt>();
  private readonly flushing = new Set<string>();
  private idleWaiters: (() => void)[] = [];

  get size(): number {
    return this.byId.size;
  }

  get(id: string): Attempt | undefined {
    return this.byId.get(id);
  }

  add(a: Attempt): void {
    this.byId.set(a.job.id, a);
  }

  /**
   * Settles `a`: its timeout cleared, out of the set. False if it was settled already. An attempt
   * a later claim of the same job has replaced (a claim a crash forgot, then claimed again:
   * docs/reliability.md, case 4) leaves that later attempt in the set.
   */
  end(a: Attempt): boolean {
    if (a.settled) return false;
    a.settled = true;
    if (a.timer) clearTimeout(a.timer);
    if (this.byId.get(a.job.id) === a) this.byId.delete(a.job.id);
    return true;
  }

  /** Ends every attempt at once (shutdown), calling `each` on each before the set empties. */
  endAll(each: (a: Attempt) => void): void {
    for (const a of this.byId.values()) {
      a.settled = true;
      if (a.timer) clearTimeout(a.timer);
      each(a);
    }
    this.byId.clear();
  }

  /** Ids whose leases must be renewed: running, and settled but still flushing progress. */
  ids(): string[] {
    return [...this.byId.keys(), ...this.flushing];
  }

  flushStarted(id: string): void {
    this.flushing.add(id);
  }

  /** Call `notifyIdle` once the outcome is with the completer. */
  flushEnded(id: string): void {
    this.flushing.delete(id);
  }

  notifyIdle(): void {
    if (this.byId.size === 0 && this.flushing.size === 0) this.idleWaiters.splice(0).forEach((w) => w());
  }

  /** Resolves when no job runs (and every settled attempt's outcome is with the completer). */
  idle(): Promise<void> {
    if (this.byId.size === 0 && this.flushing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
