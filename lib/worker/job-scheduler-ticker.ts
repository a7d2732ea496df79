import { planTicks, stepOf, type NextTick } from '../core/job-scheduler';
import type { DueScheduler, JobSchedulers, SchedulerAdvance } from '../db/job-schedulers';
import type { EngineLogger } from './logger';
import type { BackgroundService } from './service';

/** Due schedulers claimed per transaction; a pass takes batches until none is due. */
const BATCH = 500;
/** Parsed patterns kept (a croner object per distinct pattern and zone); cleared when full. */
const MAX_CACHED_STEPS = 10_000;
/** The shortest re-arm: a due row another node holds (SKIP LOCKED) must not make this one spin. */
const MIN_WAIT_MS = 25;

/**
 * Runs the job schedulers of one schema (lib/db/job-schedulers.ts). Every node with workers runs
 * one; no leader. A pass claims the due schedulers with SKIP LOCKED, inserts their ticks' jobs
 * and moves their next tick forward in one transaction, so each tick is one job however many
 * nodes pass at once. The timer is armed for the soonest tick by the database's clock, and at
 * most `pollMs` ahead, so a scheduler another process upserts is seen within that.
 */
export class JobSchedulerTicker implements BackgroundService {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  private stopped = false;
  private readonly steps = new Map<string, NextTick>();

  constructor(
    private readonly schedulers: JobSchedulers,
    private readonly catchUpMs: number,
    private readonly pollMs: number,
    private readonly logger: EngineLogger,
    private readonly onError: (err: Error) => void,
  ) {}

  start(): void {
    this.stopped = false;
    this.arm(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }

  /** One pass: every due tick enqueued (batch after batch). `now` for tests; default the database's clock. Resolves with the schedulers advanced. */
  runOnce(now?: Date): Promise<number> {
    const pass = (this.running ??= this.pass(now ?? null).finally(() => (this.running = null)));
    return pass;
  }

  private async pass(now: Date | null): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.schedulers.tick(BATCH, now, (due) => due.map((d) => this.plan(d)));
      total += n;
      if (n < BATCH) return total;
    }
  }

  private plan(d: DueScheduler): SchedulerAdvance {
    const everyMs = d.every_ms === null ? null : Number(d.every_ms);
    try {
      const step = this.stepOf(d.pattern, everyMs, d.tz);
      const { runs, next } = planTicks(
        { due: d.next_run_at, everyMs, endAt: d.end_at, limit: d.limit, count: d.count },
        step,
        d.now,
        this.catchUpMs,
      );
      if (!next) this.logger.log(`Job scheduler ${d.queue}/${d.id} ended (endDate or limit reached): removed`);
      return { queue: d.queue, id: d.id, runs, next };
    } catch (err) {
      // A pattern stored by a newer version, say: this one is left for a node that reads it.
      this.onError(err as Error);
      return { queue: d.queue, id: d.id, runs: [], next: new Date(d.now.getTime() + this.pollMs) };
    }
  }

  private stepOf(pattern: string | null, everyMs: number | null, tz: string): NextTick {
    const key = `${pattern ?? ''}\u0000${everyMs ?? ''}\u0000${tz}`;
    let step = this.steps.get(key);
    if (!step) {
      if (this.steps.size >= MAX_CACHED_STEPS) this.steps.clear();
      step = stepOf({ pattern, everyMs, tz }, 'a stored job scheduler');
      this.steps.set(key, step);
    }
    return step;
  }

  private arm(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.fire(), Math.max(0, ms));
    this.timer.unref();
  }

  private async fire(): Promise<void> {
    let wait = this.pollMs;
    try {
      await this.runOnce();
      const due = await this.schedulers.nextDueInMs();
      if (due !== null) wait = Math.min(wait, Math.max(due, MIN_WAIT_MS));
    } catch (err) {
      this.onError(err as Error);
    }
    this.arm(wait);
  }
}
