/**
 * Answers a read from memory while its last run is recent compared with what it cost: with `n`
 * keys read, one that took `d` ms is reused for `d * (n / budget - 1)` ms after it ended, so
 * running them all again and again takes at most `budget` of the wall time together. Meant for the dashboard's counts, whose cost
 * grows with the tables: a few ms on a quiet table (redone at every poll), and up to a second
 * while a big backlog drains, when each index entry needs a visit to the heap (measured with
 * 200,000 jobs draining: 300-340 ms of server CPU for the live counts, 1-2 s of wall time on a
 * shared 2-core machine). Concurrent callers of one key share one run.
 */
export class CostlyReads {
  private readonly done = new Map<string, { value: unknown; endedAt: number; tookMs: number }>();
  private readonly running = new Map<string, Promise<unknown>>();
  /** Bumped by clear(): a run that started before it is not kept, nor shared with later callers. */
  private generation = 0;

  constructor(
    private readonly budget: number,
    private readonly now: () => number = Date.now,
  ) {}

  read<T>(key: string, run: () => Promise<T>): Promise<T> {
    const last = this.done.get(key);
    if (last && this.budget < 1 && this.now() - last.endedAt < last.tookMs * (this.done.size / this.budget - 1)) {
      return Promise.resolve(last.value as T);
    }
    const inFlight = this.running.get(key);
    if (inFlight) return inFlight as Promise<T>;
    const started = this.now();
    const generation = this.generation;
    const p = run()
      .then((value) => {
        const endedAt = this.now();
        if (generation === this.generation) this.done.set(key, { value, endedAt, tookMs: endedAt - started });
        return value;
      })
      .finally(() => {
        if (this.running.get(key) === p) this.running.delete(key);
      });
    this.running.set(key, p);
    return p;
  }

  /** Forgets every answer: the next read of each key runs (after an action that changed them). */
  clear(): void {
    this.generation++;
    this.done.clear();
    this.running.clear();
  }
}
