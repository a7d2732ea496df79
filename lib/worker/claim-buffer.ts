import type { ClaimedRow } from '../db/job-store';

/**
 * What the worker's claim loop does, as one named mode instead of loose flags (graphile-worker's
 * localQueue STARTING / POLLING / WAITING / RELEASED):
 * - `claiming`: the queue may hold due jobs; claim whenever the jobs held fall below the refill mark.
 * - `waiting`: the last claim came back short and no wake-up came since: claim only when woken.
 * - `manual`: claims only in `runRound` (nestjs-pg-queue/testing); wake-ups are ignored.
 * - `released`: stopping: claim nothing more, start nothing buffered.
 */
export type ClaimMode = 'claiming' | 'waiting' | 'manual' | 'released';

/**
 * Prefetched rows, oldest first, and the claim loop's mode. `at[i]` is when `rows[i]` arrived (a
 * number array: no object per job).
 */
export class ClaimBuffer {
  private rows: ClaimedRow[] = [];
  private at: number[] = [];
  private current: ClaimMode = 'claiming';

  get mode(): ClaimMode {
    return this.current;
  }

  /** The loop claims whenever the jobs held fall below the refill mark. */
  get claiming(): boolean {
    return this.current === 'claiming';
  }

  get released(): boolean {
    return this.current === 'released';
  }

  /** The loop claims on wake-ups (not manual, not released). */
  get wakeable(): boolean {
    return this.current === 'claiming' || this.current === 'waiting';
  }

  /** A job is due (a wake-up, or a slot a global limit withheld may be free): claim again. */
  woken(): void {
    if (this.current === 'waiting') this.current = 'claiming';
  }

  /** A claim came back short with no wake-up meanwhile: the queue was empty. */
  cameBackShort(): void {
    if (this.current === 'claiming') this.current = 'waiting';
  }

  manual(): void {
    this.current = 'manual';
  }

  release(): void {
    this.current = 'released';
  }

  get length(): number {
    return this.rows.length;
  }

  /** When the oldest buffered row arrived (undefined when empty). */
  get oldestAt(): number | undefined {
    return this.at[0];
  }

  push(rows: readonly ClaimedRow[], at: number): void {
    for (const row of rows) {
      this.rows.push(row);
      this.at.push(at);
    }
  }

  /** The oldest row; call only while `length > 0`. */
  shift(): ClaimedRow {
    this.at.shift();
    return this.rows.shift()!;
  }

  /** Takes the row of job `id` out, or null. */
  remove(id: string): ClaimedRow | null {
    const i = this.rows.findIndex((r) => String(r.id) === id);
    if (i < 0) return null;
    this.at.splice(i, 1);
    return this.rows.splice(i, 1)[0];
  }

  ids(): string[] {
    return this.rows.map((r) => String(r.id));
  }

  /** Empties the buffer; returns the ids it held, to hand back. */
  take(): string[] {
    const ids = this.ids();
    this.rows = [];
    this.at = [];
    return ids;
  }
}
