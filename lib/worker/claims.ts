import type { ClaimedRow, JobStore } from '../db/job-store';
import type { ResolvedQueueOptions } from '../core/options/resolved';
import { CLAIM_WINDOW_DEFAULTS, ClaimWindow, type ClaimPlan } from './claim-window';
import { WakeTimer } from './wake-timer';

/** What the claims of a worker need. */
export interface ClaimContext {
  readonly store: JobStore;
  readonly workerId: string;
  readonly leaseMs: number;
}

const FULL: ClaimPlan = { kind: 'full' };

/**
 * How often a worker of a grouped queue gives jobs without a group a turn (docs/groups.md):
 * finding them walks the queue's plain index past the grouped jobs, so not at every claim.
 */
export const UNGROUPED_TURN_MS = 1000;

/**
 * The claim statements one worker sends, and the books they keep: the claims in flight and the
 * jobs they asked for, the claim window (claim-window.ts) with its catch-up timer, and a rate
 * limit's "come back later". When to claim, and how many, is the worker's loop (queue-worker.ts).
 */
export class Claims {
  private readonly inFlight = new Set<Promise<ClaimedRow[]>>();
  private asked = 0;
  private answers = 0;
  private stopped = false;
  private readonly window: ClaimWindow;
  /** Fires when the catch-up claim is due, after a claim within the window came back short (claim-window.ts). */
  private readonly fullClaim: WakeTimer;

  constructor(
    private readonly queue: ResolvedQueueOptions,
    private readonly ctx: ClaimContext,
    /** The worker's wake-up: a claim is due in `dueInMs` (0: now). */
    private readonly wake: (dueInMs: number) => void,
    /** The worker's concurrency now (setConcurrency may change it). */
    private readonly concurrency: () => number = () => queue.concurrency,
  ) {
    this.window = new ClaimWindow(CLAIM_WINDOW_DEFAULTS);
    this.fullClaim = new WakeTimer(() => this.wake(0));
  }

  /**
   * The queue's global concurrency stored in the database, as last read (stored-limits.ts);
   * undefined until the first read, when the serialised path (which reads it itself) is taken.
   */
  storedGlobal: number | null | undefined = undefined;

  /** A queue with a global limit (option or stored, or not yet known) claims through the serialised path, and never prefetches. */
  get limited(): boolean {
    // A grouped queue takes per-group limits only (resolveQueueOptions refuses the others).
    if (this.grouped) return false;
    return this.storedGlobal !== null || this.queue.globalConcurrency !== null || this.queue.limiter !== null;
  }

  /** registerQueue({ group }): claims through the grouped claim (db/claim-grouped.ts). */
  get grouped(): boolean {
    return this.queue.group !== null;
  }

  /** The last group the grouped claim visited: the next claim goes on from there. */
  private groupCursor: string | null = null;
  /** When jobs without a group last had their turn (performance.now()). */
  private ungroupedAt = -Infinity;

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Jobs asked for by claims in flight. */
  get requested(): number {
    return this.asked;
  }

  /** Claim statements that came back (with jobs or without): each one a look at the queue. */
  get answered(): number {
    return this.answers;
  }

  /** The claim to send at `sentAt` (performance.now()): full under a global limit, else as the window says. */
  plan(sentAt: number): ClaimPlan {
    // Concurrency 1 keeps every claim full: on one node that queue's order is strict (docs/limits.md).
    return this.limited || this.grouped || this.concurrency() === 1 ? FULL : this.window.plan(sentAt);
  }

  /**
   * Sends the claim `plan` of `free` jobs and counts it in flight until it lands; its rows come
   * sorted in the queue's order. Rejects when the database does.
   */
  async send(plan: ClaimPlan, sentAt: number, free: number): Promise<ClaimedRow[]> {
    this.asked += free;
    this.window.sent(plan, sentAt);
    const claim = this.grouped ? this.claimGrouped(free) : this.limited ? this.claimLimited(free) : this.claimAs(plan, free);
    this.inFlight.add(claim);
    try {
      const rows = await claim;
      this.answers++;
      if (!this.limited && !this.grouped) this.afterClaim(plan, sentAt, free, rows);
      return rows.sort(byClaimOrder);
    } finally {
      this.asked -= free;
      this.inFlight.delete(claim);
    }
  }

  /** One full claim, not counted in flight (manual mode's round). */
  async sendOnce(free: number): Promise<ClaimedRow[]> {
    const { store, workerId, leaseMs } = this.ctx;
    const rows = this.grouped
      ? await this.claimGrouped(free)
      : this.limited
        ? await this.claimLimited(free)
        : await store.claim(this.queue.name, free, workerId, leaseMs);
    this.answers++;
    return rows.sort(byClaimOrder);
  }

  /** A job may be waiting outside the window (a hand-back): the next claim is the catch-up. */
  restart(): void {
    this.window.restart();
  }

  /** Sends nothing more; resolves once the claims in flight have landed. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.fullClaim.clear();
    await Promise.all([...this.inFlight].map((c) => c.catch(() => undefined)));
  }

  /** The full claim, the claim within the window, or the catch-up (claim-window.ts says which). */
  private claimAs(plan: ClaimPlan, free: number): Promise<ClaimedRow[]> {
    const { store, workerId, leaseMs } = this.ctx;
    if (plan.kind === 'full') return store.claim(this.queue.name, free, workerId, leaseMs);
    const side = plan.kind === 'window' ? 'inside' : 'outside';
    return store.claimSince(this.queue.name, free, workerId, leaseMs, plan.fromPriority, plan.windowMs, side);
  }

  /** The grouped claim: fair turns from this worker's cursor on, within the per-group limits. */
  private async claimGrouped(free: number): Promise<ClaimedRow[]> {
    const group = this.queue.group;
    if (!group) throw new Error('claimGrouped: the queue is not grouped');
    const now = performance.now();
    const ungrouped = now - this.ungroupedAt >= UNGROUPED_TURN_MS;
    if (ungrouped) this.ungroupedAt = now;
    const { rows, cursor } = await this.ctx.store.groups.claim(
      this.queue.name,
      free,
      this.ctx.workerId,
      this.ctx.leaseMs,
      this.groupCursor,
      group,
      ungrouped,
    );
    this.groupCursor = cursor;
    return rows;
  }

  private async claimLimited(free: number): Promise<ClaimedRow[]> {
    const { rows, retryInMs } = await this.ctx.store.claimLimited(
      this.queue.name,
      free,
      this.ctx.workerId,
      this.ctx.leaseMs,
      this.queue,
    );
    // The rate limit stopped it: come back when the window lets a job start.
    if (retryInMs !== null) this.wake(retryInMs);
    return rows;
  }

  private afterClaim(plan: ClaimPlan, sentAt: number, free: number, rows: readonly ClaimedRow[]): void {
    this.window.answered(
      plan,
      sentAt,
      free,
      rows.map((r) => r.priority),
    );
    if (plan.kind === 'window' && rows.length < free) this.armFullClaim();
  }

  /**
   * After a short claim within the window, a job outside it (an old run_at, a new lowest
   * priority) may be waiting with no wake-up to come: send the catch-up when it is next due.
   */
  private armFullClaim(): void {
    if (this.fullClaim.armed || this.stopped) return;
    const inMs = this.window.fullDueInMs(performance.now());
    if (inMs === null) return;
    this.fullClaim.arm(Math.ceil(inMs), 1);
  }
}

/** The queue's order: priority, then run_at. */
function byClaimOrder(a: ClaimedRow, b: ClaimedRow): number {
  return a.priority - b.priority || a.run_at_ms - b.run_at_ms;
}
