/** A queue's figures, from one cheap query (`queue.getCounts()`). */
export interface QueueCounts {
  /** Due now and not yet claimed: the backlog. */
  readonly waiting: number;
  /** Waiting for a later `runAt` (delays and retry backoffs); parked jobs are `sleeping` or `waitingSignal`. */
  readonly delayed: number;
  /** Claimed and running (or prefetched) under a lease. */
  readonly active: number;
  /** Active jobs whose lease has expired: their worker died or stalled; the rescuer will act. */
  readonly stalled: number;
  /** Failed jobs kept in history. */
  readonly failed: number;
  /** Waiting on their children or dependencies (state `waiting-children`): not claimable yet. */
  readonly waitingChildren: number;
  /**
   * Parked by `job.sleep()` until its wake time: no worker holds them, no attempt is used. A
   * state of its own (BullMQ has none: a sleep there is a delayed job), so a day's sleep of many
   * jobs does not read as a backlog of delayed ones.
   */
  readonly sleeping: number;
  /** Parked by `job.waitFor()` until `queue.signal()` (or its timeout): no worker holds them. */
  readonly waitingSignal: number;
  /** Age of the oldest due job (now - its runAt), or null when none is waiting. */
  readonly oldestWaitingAgeMs: number | null;
}

/** The figures of a queue with no jobs. */
export const EMPTY_COUNTS: QueueCounts = Object.freeze({
  waiting: 0,
  delayed: 0,
  active: 0,
  stalled: 0,
  failed: 0,
  waitingChildren: 0,
  sleeping: 0,
  waitingSignal: 0,
  oldestWaitingAgeMs: null,
});
