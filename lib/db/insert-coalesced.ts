import type { Inserts } from './insert';
import type { NewJobRow } from './new-job';
import { isRefusal } from './refusal';

/**
 * One job without a unique key on the queue's own pool (add() outside a transaction). While
 * fewer than the pool's size are in flight it goes at once, alone; past that, adds wait and
 * leave together as one multi-row insert (the same statement as addBulk, durable) when an
 * insert in flight returns. So an idle app pays no delay, and under load many callers share
 * one statement and one WAL flush instead of queueing for the pool's connections one commit
 * at a time: 10 concurrent callers on the default pool of 4 stored ~2,900 adds/s one by one
 * against ~5,600/s for 10 prepared inserts on 10 connections (issue 13, bench/). Each caller
 * still resolves only once its row has committed. A batch the database refuses (a value of
 * one row, say) is retried row by row, so only the bad add fails; a lost connection fails
 * every add of the batch, as it would have failed each alone (committed or not: unknown).
 */
export class CoalescedInserts {
  /** Single adds on the pool in flight now, and those waiting to go together. */
  private singleInFlight = 0;
  private singleWaiting: { row: NewJobRow; resolve: (r: { id: string; now: Date }) => void; reject: (e: Error) => void }[] = [];

  constructor(
    private readonly inserts: Inserts,
    /** The pool's size: how many single adds may be in flight before the next ones are coalesced. */
    private readonly maxSingleInFlight: number,
  ) {}

  add(row: NewJobRow): Promise<{ id: string; now: Date }> {
    if (this.singleInFlight < this.maxSingleInFlight) return this.sendSingles([row]).then((r) => r[0]);
    return new Promise((resolve, reject) => this.singleWaiting.push({ row, resolve, reject }));
  }

  private async sendSingles(rows: NewJobRow[]): Promise<{ id: string; now: Date }[]> {
    this.singleInFlight++;
    try {
      const { ids, now } = await this.inserts.insert(rows);
      return ids.map((id) => ({ id: String(id), now }));
    } finally {
      this.singleInFlight--;
      this.flushSingles();
    }
  }

  /** The adds that waited for an insert in flight: one statement for up to 1,000 of them. */
  private flushSingles(): void {
    if (this.singleWaiting.length === 0 || this.singleInFlight >= this.maxSingleInFlight) return;
    const batch = this.singleWaiting.splice(0, 1000);
    this.sendSingles(batch.map((w) => w.row)).then(
      (out) => batch.forEach((w, i) => w.resolve(out[i])),
      (err: Error) => {
        if (batch.length === 1 || !isRefusal(err)) return batch.forEach((w) => w.reject(err));
        // One row's value was refused: each alone, so only its own add fails.
        for (const w of batch) this.sendSingles([w.row]).then((r) => w.resolve(r[0]), w.reject);
      },
    );
  }
}
