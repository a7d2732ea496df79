import type { JobStore, Outcome, SettleResult } from '../db/job-store';
import type { Job, JobAttemptError } from '../core/job';
import { attemptErrorJson } from './retry-policy';
import type { EngineLogger } from './logger';
import { isRefusal } from '../db/refusal';
import type { BackgroundService } from './service';

/**
 * An attempt's outcome with what its event reports once the outcome is written. The fields ride
 * on the outcome object the worker makes anyway: no allocation per job for the events.
 */
export type PendingOutcome =
  | (Extract<Outcome, { kind: 'completed' }> & { readonly job: Job; readonly result: unknown })
  | (Extract<Outcome, { kind: 'retry' | 'failed' | 'cancelled' | 'dead-letter' }> & {
      readonly job: Job;
      readonly error: JobAttemptError;
      /** What the handler threw (outcome.ts), for its span; never written. */
      readonly thrown?: unknown;
    })
  | (Extract<Outcome, { kind: 'snoozed' }> & { readonly job: Job });

/** What the completer tells its owner about each outcome of a batch, after the batch's write. */
export interface OutcomeReport {
  /** The outcome's row was written: its event may fire now, and reads see the new state. */
  written(outcome: PendingOutcome): void;
  /** No row matched (id, attempt, locked_by): the lease was lost, another worker or the rescuer has the job. */
  dropped(outcome: PendingOutcome): void;
  /**
   * The database refused this outcome even alone (`err`). `failedInstead`: the failure written in
   * its place (`refusedOutcome`); null when that was not written either (the lease ends it then).
   */
  refused(outcome: PendingOutcome, err: Error, failedInstead: PendingOutcome | null): void;
}

/** Outcome writes in flight at most. */
const MAX_WRITES_IN_FLIGHT = 2;
/** Outcomes waiting that send a further write beside the one in flight. */
const PARALLEL_WRITE_FROM = 64;

/**
 * Writes attempt outcomes in batches. One write is in flight; outcomes that arrive meanwhile form
 * the next batch, so batches grow with load and an idle queue pays no delay. Once
 * PARALLEL_WRITE_FROM outcomes wait behind it (the load outruns one connection), a second write goes
 * out beside it: with one write at a time the completion was the drain's ceiling, one backend
 * busy all along (its CPU and its commit's WAL flush) while the second core idled (bench/,
 * issue 13). Two writes never carry the same outcome, so they touch disjoint job rows.
 * A crash before a write only means the job runs again after its lease: at-least-once holds.
 *
 * Events come from the rows the write returned (as in River's jobcompleter): a listener reads
 * the state it is told about, and an outcome that matched no row is reported, not lost.
 *
 * One outcome the database refuses (a value out of range, say) must not hold back the others:
 * it made the whole batch fail and retry for ever, stalling every completion of the process.
 * A batch that fails with anything but a connection-type error is written again row by row; a
 * row that fails alone is failed with an error naming the cause (`refusedOutcome`).
 */
export class Completer implements BackgroundService {
  private pending: PendingOutcome[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private scheduled = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private droppedCount = 0;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly logger: EngineLogger,
    private readonly report: OutcomeReport,
    private readonly maxBatch = 500,
    /** After each batch is written: a slot counted by a global limit may have freed. */
    private readonly onWritten: () => void = () => undefined,
  ) {}

  /**
   * Outcomes whose write matched no row: the job was no longer this worker's attempt (its lease
   * was lost and another worker owns it, or it was removed), so the guard refused to write it.
   */
  get unmatched(): number {
    return this.droppedCount;
  }

  /** Ids whose outcome is not yet written: their leases must still be renewed. */
  pendingIds(): string[] {
    return this.pending.map((o) => o.id);
  }

  /** Nothing to start: a write goes out when an outcome arrives (`push`). */
  start(): void {}

  /**
   * Clears a retry waiting and resolves once the writes in flight landed; outcomes still pending
   * stay for `drain`, which shutdown calls with its deadline instead of this.
   */
  async stop(): Promise<void> {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.allInFlight();
  }

  /** One write of what is pending now (or the writes in flight, if no further one may start). */
  runOnce(): Promise<void> {
    return this.flush();
  }

  push(outcome: PendingOutcome): void {
    this.pending.push(outcome);
    if (!this.scheduled && !this.retryTimer && this.mayStartWrite()) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.flush();
      });
    }
  }

  private flush(): Promise<void> {
    if (this.pending.length === 0 || !this.mayStartWrite()) return this.allInFlight();
    const batch = this.pending.splice(0, this.maxBatch);
    const write: Promise<void> = this.store
      .settle(batch, this.workerId)
      .then(
        (r) => this.settled(batch, r),
        (err: Error) => this.retryLater(batch, err),
      )
      .finally(() => {
        this.inFlight.delete(write);
        if (this.pending.length === 0 || this.retryTimer) return;
        if (this.failures === 0) {
          void this.flush();
        } else if (this.inFlight.size === 0) {
          const delay = Math.min(5000, 50 * 2 ** Math.min(this.failures, 7));
          this.retryTimer = setTimeout(() => {
            this.retryTimer = null;
            void this.flush();
          }, delay);
        }
      });
    this.inFlight.add(write);
    return write;
  }

  /** None in flight, or (writes going through) a free write slot and enough waiting to fill it. */
  private mayStartWrite(): boolean {
    const n = this.inFlight.size;
    return n === 0 || (n < MAX_WRITES_IN_FLIGHT && this.failures === 0 && this.pending.length >= PARALLEL_WRITE_FROM);
  }

  private allInFlight(): Promise<void> {
    return this.inFlight.size === 0 ? Promise.resolve() : Promise.all(this.inFlight).then(() => undefined);
  }

  private async settled(batch: PendingOutcome[], { written, failures }: SettleResult<PendingOutcome>): Promise<void> {
    if (failures.length === 0) {
      this.failures = 0;
      this.reportBatch(batch, written);
      this.onWritten();
      return;
    }
    // The statements that went through wrote their rows: report those now.
    const notWritten = new Set(failures.flatMap((f) => f.outcomes));
    this.reportBatch(
      batch.filter((o) => !notWritten.has(o)),
      written,
    );
    let again: PendingOutcome[] = [];
    let cause: Error | null = null;
    for (const f of failures) {
      const left = isRefusal(f.error) ? await this.oneByOne(f.outcomes) : f;
      if (left && left.outcomes.length) {
        again = again.concat(left.outcomes);
        cause = left.error;
      }
    }
    if (cause) this.retryLater(again, cause);
    else this.failures = 0;
    this.onWritten();
  }

  /**
   * Keep the outcomes and try again: the database may be restarting. Until they are written the
   * heartbeat keeps renewing these jobs' leases.
   */
  private retryLater(outcomes: PendingOutcome[], err: Error): void {
    this.pending.unshift(...outcomes);
    this.failures++;
    this.logger.warn(`Writing ${outcomes.length} job outcome(s) failed (${err.message}); retrying`);
  }

  private reportBatch(batch: readonly PendingOutcome[], written: (o: PendingOutcome) => boolean): void {
    for (const o of batch) {
      // A listener that throws must not stop the reports of the rest of the batch.
      try {
        if (written(o)) this.report.written(o);
        else {
          this.droppedCount++;
          this.report.dropped(o);
        }
      } catch (err) {
        this.logger.error(
          `pg-queue: reporting the outcome of job ${o.id} threw: ${(err as Error)?.message}`,
          (err as Error)?.stack,
        );
      }
    }
  }

  /**
   * A statement was refused: writes its outcomes one at a time, so only the bad one stays
   * behind, and fails that one instead. Returns what is left when another kind of error (the
   * connection went) stopped it, to be retried with the batch.
   */
  private async oneByOne(outcomes: PendingOutcome[]): Promise<{ outcomes: PendingOutcome[]; error: Error } | null> {
    for (let i = 0; i < outcomes.length; i++) {
      const o = outcomes[i];
      let r: SettleResult<PendingOutcome>;
      try {
        r = await this.store.settle([o], this.workerId);
      } catch (error) {
        return { outcomes: outcomes.slice(i), error: error as Error };
      }
      const [failure] = r.failures;
      if (!failure) this.reportBatch([o], r.written);
      else if (isRefusal(failure.error)) await this.failRefused(o, failure.error);
      else return { outcomes: outcomes.slice(i), error: failure.error };
    }
    return null;
  }

  /** Fails the job whose outcome was refused, recording why; never leaves it to wedge the batch. */
  private async failRefused(o: PendingOutcome, err: Error): Promise<void> {
    const replacement = refusedOutcome(o, err);
    let failedInstead: PendingOutcome | null = null;
    try {
      const r = await this.store.settle([replacement], this.workerId);
      if (r.failures.length) throw r.failures[0].error;
      if (r.written(replacement)) failedInstead = replacement;
    } catch (again) {
      // Even the plain failure was refused: give the job up to its lease; the rescuer retries
      // or fails it, recording a LeaseExpiredError. It is not lost, only late.
      this.logger.error(`pg-queue: failing job ${o.id} after its outcome was refused also failed (${(again as Error).message})`);
    }
    try {
      this.report.refused(o, err, failedInstead);
    } catch (e) {
      this.logger.error(`pg-queue: reporting the outcome of job ${o.id} threw: ${(e as Error)?.message}`, (e as Error)?.stack);
    }
  }

  /** Writes everything pending; gives up after `deadline` (epoch ms) and returns what is left. */
  async drain(deadline: number): Promise<number> {
    while ((this.pending.length || this.inFlight.size) && Date.now() < deadline) {
      if (this.retryTimer) {
        clearTimeout(this.retryTimer);
        this.retryTimer = null;
      }
      await (this.inFlight.size ? this.allInFlight() : this.flush());
      if (this.failures > 0 && this.pending.length) await new Promise((r) => setTimeout(r, 100));
    }
    return this.pending.length;
  }
}

export { isRefusal } from '../db/refusal';

/** The failure that replaces an outcome the database refused: the attempt fails for good, saying why. */
export function refusedOutcome(o: PendingOutcome, err: Error): PendingOutcome {
  const error: JobAttemptError = {
    attempt: o.attempt,
    name: 'OutcomeRefusedError',
    message: `The database refused this attempt's ${o.kind} outcome (${String(err.message).slice(0, 500)}); the job was failed instead.`,
    at: new Date().toISOString(),
  };
  const claimedAtMs = o.kind === 'completed' ? null : o.claimedAtMs;
  return { kind: 'failed', id: o.id, attempt: o.attempt, claimedAtMs, errorJson: attemptErrorJson(error), job: o.job, error };
}
