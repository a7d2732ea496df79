/**
 * Each queue's job names, kept for `ttlMs` after they were read. The queue page asks for them at
 * every 2 s poll, for its name filter's choices, and they change when a new kind of job appears:
 * a read every poll would cost the database for an answer that is the same. A new name shows
 * within `ttlMs` (at once after an action of the dashboard: clear()). Concurrent callers of one
 * key share one read; at most `maxKeys` queues are kept (the oldest read is dropped first).
 */
export class RecentNames {
  private readonly kept = new Map<string, { names: string[]; at: number }>();
  private readonly running = new Map<string, Promise<string[]>>();
  private generation = 0;

  constructor(
    private readonly ttlMs = 30_000,
    private readonly maxKeys = 200,
    private readonly now: () => number = Date.now,
  ) {}

  read(key: string, run: () => Promise<string[]>): Promise<string[]> {
    const k = this.kept.get(key);
    if (k && this.now() - k.at < this.ttlMs) return Promise.resolve(k.names);
    const inFlight = this.running.get(key);
    if (inFlight) return inFlight;
    const generation = this.generation;
    const p = run()
      .then((names) => {
        if (generation === this.generation) {
          this.kept.delete(key);
          this.kept.set(key, { names, at: this.now() });
          if (this.kept.size > this.maxKeys) this.kept.delete(this.kept.keys().next().value as string);
        }
        return names;
      })
      .finally(() => {
        if (this.running.get(key) === p) this.running.delete(key);
      });
    this.running.set(key, p);
    return p;
  }

  /** Forgets every answer (after an action that may have added a name). */
  clear(): void {
    this.generation++;
    this.kept.clear();
    this.running.clear();
  }
}
