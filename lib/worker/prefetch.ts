/** Handlers faster than this on average let the worker prefetch. */
const FAST_JOB_MS = 20;
/**
 * Fast handlers claim up to this many ahead. Waiting on claims was what held the drain back:
 * with 50 per claim the no-op drain reached 41 % of the raw-SQL loop (which claims 100), with 100
 * and two claims in flight 76 %, with 200 about 90 % (bench/, 2 cores). A claim of 200 costs
 * little more than one of 50, and buffered jobs go back after MAX_BUFFER_WAIT_MS if they wait.
 */
const MIN_FAST_PREFETCH = 200;
/**
 * Handlers faster than VERY_FAST_JOB_MS on average (no-op-like: a buffer of 600 empties in well
 * under a second at concurrency 10) claim up to VERY_FAST_PREFETCH ahead, in claims of half of
 * it: ~300 rows per claim. The claim goes out the moment the buffer falls to half (refillDue), so
 * the next batch arrives while the rest of the buffer runs. With 400 (claims of ~200 once the
 * refill went out on time) the drain made 1.0 transactions per 100 jobs, with 600 0.7 and 10-20 %
 * less CPU per job; 800 was no better within this machine's noise (issue 13, bench/, drains of
 * 50,000, 2 runs of 3 each).
 */
const VERY_FAST_JOB_MS = 2;
const VERY_FAST_PREFETCH = 600;
/** A prefetched job that waited longer than this for a slot goes back to the queue. */
export const MAX_BUFFER_WAIT_MS = 1000;

/**
 * How far ahead a worker claims, from how fast its handlers have been: a moving average of
 * their durations (Infinity until the first one ends, and again after a stale buffer).
 */
export class PrefetchPace {
  private avgHandlerMs = Infinity;

  /** An attempt took `ms`. */
  record(ms: number): void {
    this.avgHandlerMs = this.avgHandlerMs === Infinity ? ms : 0.9 * this.avgHandlerMs + 0.1 * ms;
  }

  /** A buffered job waited too long: prefetch stops until handlers prove fast again. */
  reset(): void {
    this.avgHandlerMs = Infinity;
  }

  /** Jobs to claim ahead at this `concurrency` (0: slow handlers, no prefetch). */
  size(concurrency: number): number {
    if (this.avgHandlerMs < VERY_FAST_JOB_MS) return Math.max(4 * concurrency, VERY_FAST_PREFETCH);
    return this.avgHandlerMs < FAST_JOB_MS ? Math.max(4 * concurrency, MIN_FAST_PREFETCH) : 0;
  }
}

/** Fast handlers may have two claims in flight, so the next batch is on its way while this one runs; slow ones need only one. */
export function maxClaimsInFlight(prefetch: number): number {
  return prefetch > 0 ? 2 : 1;
}

/** Claim when fewer are held: a slot would otherwise idle, or (prefetching) half the buffer is used. */
export function refillMark(concurrency: number, prefetch: number): number {
  return concurrency + Math.floor(prefetch / 2);
}
