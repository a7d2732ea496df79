/**
 * Node's longest timer (about 24.8 days): a longer one fires after 1 ms with a
 * TimeoutOverflowWarning. Jobs may be delayed 100 years; a capped wake-up timer that fires early
 * only claims nothing, and the poll covers the rest.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A one-shot, unreferenced timer that keeps the earliest time it was asked for: a later request
 * while it is armed is dropped (the earlier firing covers it), an earlier one replaces it.
 */
export class WakeTimer {
  private timer: NodeJS.Timeout | null = null;
  private at = Infinity;

  constructor(private readonly fire: () => void) {}

  get armed(): boolean {
    return this.timer !== null;
  }

  /** Fires `inMs` from now, `slackMs` late (capped at MAX_TIMER_MS), unless set to fire sooner. */
  arm(inMs: number, slackMs: number): void {
    const at = Date.now() + inMs;
    if (at >= this.at) return;
    if (this.timer) clearTimeout(this.timer);
    this.at = at;
    this.timer = setTimeout(this.ring, Math.min(inMs + slackMs, MAX_TIMER_MS));
    this.timer.unref();
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.at = Infinity;
  }

  private readonly ring = (): void => {
    this.timer = null;
    this.at = Infinity;
    this.fire();
  };
}
