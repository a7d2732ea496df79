import type { JobStore, NewJobRow } from '../db/job-store';
import type { ResolvedSchedule } from '../core/cron-schedule';
import type { EngineLogger } from './logger';
import type { BackgroundService } from './service';

/** A timer further out than this is re-armed on expiry (setTimeout's limit is about 24.8 days). */
const MAX_TIMER_MS = 3_600_000;
/** At most this many missed ticks are caught up per schedule and pass (a seconds-level cron after a long outage). */
const MAX_CATCH_UP = 100;

/** A schedule and the job row each of its ticks inserts. */
export interface CronEntry {
  readonly schedule: ResolvedSchedule;
  readonly row: NewJobRow;
}

/**
 * Enqueues recurring jobs. Every node that runs a schedule arms a timer for its next tick and,
 * when it fires, tries to move the schedule's last tick forward; the database lets exactly one
 * node do so per tick, in the statement that inserts the job. No leader is needed, so none can
 * be lost: if a node dies, the others still tick. Ticks missed while no node ran (a restart, an
 * outage, a failed insert) are caught up at start and on every maintenance pass, each once, as
 * far back as `catchUpMs`.
 */
export class CronScheduler implements BackgroundService {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(
    private readonly store: JobStore,
    private readonly entries: readonly CronEntry[],
    private readonly catchUpMs: number,
    private readonly logger: EngineLogger,
    private readonly onError: (err: Error) => void,
  ) {}

  get size(): number {
    return this.entries.length;
  }

  /** Catches up (not awaited: a database that is down must not hold the boot), then arms each schedule's timer. */
  start(): void {
    void this.catchUp().then(() => {
      for (const e of this.entries) this.arm(e);
    });
  }

  /** Clears the timers; a tick's insert already sent is not waited for (a lost one is caught up later). */
  stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    return Promise.resolve();
  }

  /** The catch-up: run at start and by every rescue pass. */
  runOnce(): Promise<void> {
    return this.catchUp();
  }

  /** Enqueues the ticks each schedule missed within the catch-up window, oldest first. */
  async catchUp(now = new Date()): Promise<void> {
    for (const e of this.entries) {
      try {
        const last = await this.store.lastTick(e.schedule.key);
        if (!last) continue; // never ticked: the schedule starts with its next tick
        let t = e.schedule.next(new Date(Math.max(last.getTime(), now.getTime() - this.catchUpMs)));
        for (let n = 0; t && t <= now && n < MAX_CATCH_UP; n++, t = e.schedule.next(t)) {
          if (await this.store.enqueueTick(e.schedule.key, t, e.row)) {
            this.logger.log(`Enqueued missed tick ${t.toISOString()} of ${e.schedule.key} (${e.schedule.cron})`);
          }
        }
      } catch (err) {
        this.onError(err as Error);
      }
    }
  }

  private arm(e: CronEntry): void {
    if (this.stopped) return;
    const tick = e.schedule.next(new Date());
    if (!tick) return;
    const wait = tick.getTime() - Date.now();
    const timer = setTimeout(
      () => {
        if (wait > MAX_TIMER_MS) return this.arm(e);
        this.store.enqueueTick(e.schedule.key, tick, e.row).catch((err: Error) => this.onError(err)); // a failed one is caught up later
        this.arm(e);
      },
      Math.min(Math.max(wait, 0), MAX_TIMER_MS),
    );
    timer.unref();
    this.timers.set(e.schedule.key, timer);
  }
}
