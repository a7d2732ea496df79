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
 * number array: no object per job). The rows before `head` are taken: `shift` moves the head
 * instead of shifting both arrays (two Array.shift per started job, each a copy of the buffer
 * once V8 stops trimming in place), and the arrays are cut back when the buffer empties or
 * its taken part outgrows the rest.
 */
export class ClaimBuffer {
  private rows: ClaimedRow[] = [];
  private at: number[] = [];
  private head = 0;
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
    return this.rows.length - this.head;
  }

  /** When the oldest buffered row arrived (undefined when empty). */
  get oldestAt(): number | undefined {
    return this.head < this.at.length ? this.at[this.head] : undefined;
  }

  push(rows: readonly ClaimedRow[], at: number): void {
    this.compact();
    for (const row of rows) {
      this.rows.push(row);
      this.at.push(at);
    }
  }

  /** The oldest row; call only while `length > 0`. */
  shift(): ClaimedRow {
    const row = this.rows[this.head];
    // Let go of the row: a job that ran is not kept alive by the buffer until the next cut.
    (this.rows as (ClaimedRow | undefined)[])[this.head] = undefined;
    this.head++;
    if (this.head === this.rows.length) this.clear();
    return row;
  }

  /** Takes the row of job `id` out, or null. */
  remove(id: string): ClaimedRow | null {
    let i = this.head;
    while (i < this.rows.length && String(this.rows[i].id) !== id) i++;
    if (i === this.rows.length) return null;
    this.at.splice(i, 1);
    const [row] = this.rows.splice(i, 1);
    if (this.head === this.rows.length) this.clear();
    return row;
  }

  ids(): string[] {
    const ids: string[] = [];
    for (let i = this.head; i < this.rows.length; i++) ids.push(String(this.rows[i].id));
    return ids;
  }

  /** Empties the buffer; returns the ids it held, to hand back. */
  take(): string[] {
    const ids = this.ids();
    this.clear();
    return ids;
  }

  private clear(): void {
    this.rows = [];
    this.at = [];
    this.head = 0;
  }

  /** Drops the taken rows from the arrays' front (a copy of the rest), once they are the larger part. */
  private compact(): void {
    if (this.head === 0 || this.head < this.rows.length - this.head) return;
    this.rows = this.rows.slice(this.head);
    this.at = this.at.slice(this.head);
    this.head = 0;
  }
}
