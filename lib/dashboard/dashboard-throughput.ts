import type { DashboardStore } from '../db/dashboard-store';

/** Completed and failed jobs per minute, oldest minute first, as the overview shows them. */
export interface ThroughputAnswer {
  readonly minutes: string[];
  readonly completed: number[];
  readonly failed: number[];
  readonly now: Date;
}

/**
 * One database's throughput for the overview. Counts of minutes that closed over a minute ago
 * no longer change (an outcome commits within milliseconds of its finished_at), so each poll
 * recounts only the last two minutes.
 */
export class MinuteCounts {
  private readonly closed = new Map<string, { completed: number; failed: number }>();
  private from: Date | null = null;

  constructor(private readonly store: DashboardStore) {}

  async read(): Promise<ThroughputAnswer> {
    const t = await this.store.throughput(this.from);
    const minutes = t.minutes;
    const completed = t.completed.map((n, i) => this.closed.get(minutes[i])?.completed ?? n);
    const failed = t.failed.map((n, i) => this.closed.get(minutes[i])?.failed ?? n);
    // Keep the minutes older than the last two; forget those out of the window.
    const keepBefore = minutes.length >= 2 ? minutes[minutes.length - 2] : null;
    this.closed.clear();
    minutes.forEach((m, i) => {
      if (keepBefore && m < keepBefore) this.closed.set(m, { completed: completed[i], failed: failed[i] });
    });
    this.from = keepBefore ? new Date(keepBefore) : null;
    return { minutes, completed, failed, now: t.now };
  }
}

/**
 * Several databases' throughput summed per minute: the first one's minutes and clock lead (a
 * minute another server's clock has and the first's has not is left out).
 */
export function sumByMinute(all: readonly ThroughputAnswer[]): ThroughputAnswer {
  const [first, ...rest] = all;
  if (!rest.length) return first;
  const completed = [...first.completed];
  const failed = [...first.failed];
  for (const t of rest) {
    t.minutes.forEach((m, i) => {
      const at = first.minutes.indexOf(m);
      if (at < 0) return;
      completed[at] += t.completed[i];
      failed[at] += t.failed[i];
    });
  }
  return { minutes: first.minutes, completed, failed, now: first.now };
}
