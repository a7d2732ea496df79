/**
 * The one shape of every background service (as River's startstop): the listener, the
 * heartbeat, the rescue pass and what it runs (history upkeep, vacuum), the job schedulers'
 * ticker and the completer. The supervisor starts and stops them; tests call `runOnce`.
 */
export interface BackgroundService {
  /** Starts its timers or connection and returns at once: a database that is down must not hold the boot. */
  start(): void;
  /**
   * Stops its timers (nothing new starts) and resolves once the pass it has running ended; the
   * supervisor bounds that wait, so a pass stuck on a database that does not answer cannot hold shutdown.
   */
  stop(): Promise<void>;
  /** One pass now, what its timer runs: for the owner and for tests. */
  runOnce(): Promise<unknown>;
}

/**
 * A service whose pass runs every `everyMs` on an unreferenced timer (it never keeps the process
 * alive). Passes the timer started are tracked, so `stop` can wait for them; each pass reports
 * its own errors and never rejects.
 */
export abstract class PeriodicService implements BackgroundService {
  private timer: NodeJS.Timeout | null = null;
  private readonly passes = new Set<Promise<unknown>>();

  constructor(private readonly everyMs: number) {}

  abstract runOnce(): Promise<unknown>;

  start(): void {
    this.timer = setInterval(() => void this.track(this.runOnce()), this.everyMs);
    this.timer.unref();
  }

  stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    return Promise.all([...this.passes]).then(() => undefined);
  }

  /** Keeps `pass` while it runs, for `stop` to wait on. */
  protected track(pass: Promise<unknown>): void {
    this.passes.add(pass);
    void pass.finally(() => this.passes.delete(pass));
  }
}
