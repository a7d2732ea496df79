/**
 * Which claim a worker sends next: the full claim (the head of the queue's index order), the
 * claim within a window (`claimSince`: priority >= P, run_at within the last W ms), or the
 * catch-up claim of everything outside that window (`claimOutside`).
 *
 * Why: while an old snapshot holds the xmin horizon back, every job finished since then leaves a
 * dead entry at the head of the claim index that nothing can remove, and each full claim walks
 * them all (issue 13: pick-up p95 rose from 5 ms to 76 ms in a 4-minute idle-in-transaction
 * phase at 800 jobs/s). The window starts the scan past them (lib/db/claim.ts, `claimSince`).
 *
 * Why it is safe: a claim that comes back short (fewer jobs than asked) took every committed,
 * due, unlocked job of its range. So after a short full claim sent at t, a waiting job that no
 * claim took is one committed after that claim's snapshot, and its run_at (the enqueue
 * transaction's start, or its runAt) is older than t - marginMs only if that transaction stayed
 * open longer than the margin, or if it was written with an older run_at (a runAt in the past, a
 * rolled-back claim). A later short claim of the window extends the same statement to its own
 * send time. Those jobs, and jobs of a priority below every priority this worker has claimed, are
 * outside the window: the catch-up claim, sent at least every `fullEveryMs`, takes them (and
 * only them: it still walks the dead prefix, and no job inside the window should wait for that),
 * so such a job starts at most that much later than it would have, and never waits for ever. A
 * full or catch-up claim that comes back full says nothing about the rest of the queue (a
 * backlog, perhaps of lower priority and older run_at): the window is off until a full claim
 * comes back short. A job handed back (shutdown, a stale prefetch) keeps its old run_at; its
 * wake-up asks for the catch-up claim (`restart`), so it is still taken at once.
 *
 * Pure logic, tested in test/unit/claim-window.spec.ts; the worker owns the timers.
 */

/** The next claim: the full one, or within a window. */
export type ClaimPlan =
  { readonly kind: 'full' } | { readonly kind: 'window' | 'outside'; readonly fromPriority: number; readonly windowMs: number };

export interface ClaimWindowOptions {
  /** Off: every claim is full (a queue with concurrency 1, whose order is strict on one node). */
  readonly enabled: boolean;
  /** A catch-up claim at least this often, for jobs outside the window. */
  readonly fullEveryMs: number;
  /** How much older than the last short claim a job's run_at may be and still be in the window. */
  readonly marginMs: number;
}

/**
 * Defaults. 1 s: the bound on the extra wait of a job outside the window; under a held horizon
 * one claim a second per worker (the catch-up) still walks the whole dead prefix. 5 s: at 800 jobs/s the window
 * holds about 4,000 dead entries (a full claim over 20,000 hit 813 shared buffers, over 150,000
 * 6,086: about 40 per 1,000; bench/held-xmin.mjs), and an enqueue transaction would have to stay
 * open 5 s to fall outside it.
 */
export const CLAIM_WINDOW_DEFAULTS: ClaimWindowOptions = { enabled: true, fullEveryMs: 1000, marginMs: 5000 };

const FULL: ClaimPlan = { kind: 'full' };

export class ClaimWindow {
  /** Send time of the latest short claim, while the window is on (null: off). */
  private shortAt: number | null = null;
  /** The lowest priority this worker has claimed (null: none yet). */
  private lowestPriority: number | null = null;
  private lastFullAt = -Infinity;
  private fullAsked = false;

  constructor(private readonly opts: ClaimWindowOptions = CLAIM_WINDOW_DEFAULTS) {}

  /** The claim to send at `now` (a monotonic clock in ms). */
  plan(now: number): ClaimPlan {
    if (!this.opts.enabled || this.shortAt === null || this.lowestPriority === null) return FULL;
    const catchUp = this.fullAsked || now - this.lastFullAt >= this.opts.fullEveryMs;
    const windowMs = now - this.shortAt + this.opts.marginMs;
    return { kind: catchUp ? 'outside' : 'window', fromPriority: this.lowestPriority, windowMs };
  }

  /** Call when sending the claim `plan` returned. */
  sent(plan: ClaimPlan, now: number): void {
    if (plan.kind === 'window') return;
    this.lastFullAt = now;
    this.fullAsked = false;
  }

  /**
   * Call with each answer: the plan it was sent with, its send time, how many jobs it asked
   * for, and the priorities of the jobs it claimed.
   */
  answered(plan: ClaimPlan, sentAt: number, limit: number, priorities: readonly number[]): void {
    for (const p of priorities) if (this.lowestPriority === null || p < this.lowestPriority) this.lowestPriority = p;
    const short = priorities.length < limit;
    if (plan.kind === 'full') {
      if (short) this.shortAt = Math.max(this.shortAt ?? -Infinity, sentAt);
      else this.shortAt = null;
    } else if (plan.kind === 'outside') {
      // Short: every job outside the window was taken; the window stays where it is.
      if (!short) this.shortAt = null;
    } else if (short && this.shortAt !== null) {
      this.shortAt = Math.max(this.shortAt, sentAt);
    }
  }

  /** A job may be waiting outside the window (a hand-back): the next claim is the catch-up. */
  restart(): void {
    this.fullAsked = true;
  }

  /** When the catch-up claim is next due, for a worker that would otherwise claim nothing until then. */
  fullDueInMs(now: number): number | null {
    if (!this.opts.enabled || this.shortAt === null) return null;
    return Math.max(0, this.lastFullAt + this.opts.fullEveryMs - now);
  }
}
