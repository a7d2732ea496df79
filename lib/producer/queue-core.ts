import type { ResolvedJobDefaults } from '../core/options/resolved';
import {
  executorFor,
  transactionExecutorFor,
  type SqlExecutor,
  type TransactionTarget,
  type TransactionUse,
} from '../db/executor';
import type { JobStore } from '../db/job-store';

/**
 * What every part of a queue handle shares: its name, its store, and how a call finds the
 * transaction it runs in. `Queue` is the class users see; the operator calls
 * (`QueueOperations`) and the producer calls (`Queue`) are split by responsibility only.
 * @internal
 */
export abstract class QueueCore {
  /** @internal */
  constructor(
    readonly name: string,
    protected readonly store: JobStore,
    protected readonly defaults: ResolvedJobDefaults,
    protected readonly maxPayloadBytes: number,
    protected readonly onEnqueued: ((queue: string, name: string, count: number) => void) | null = null,
    protected readonly wantsEnqueued: () => boolean = () => false,
    protected readonly ambient: () => SqlExecutor | undefined = () => undefined,
    /** Wraps a caller's transaction so it is checked to be on this queue's database (more than one connection). */
    protected readonly onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor,
  ) {}

  /**
   * The explicit transaction if one is given, else the caller's implicit one (CLS), else the pool.
   * Every method that takes a target uses it: add, addBulk, addFlow, cancel, retry, remove and
   * getJob. A write (`use` given) refuses a manager or client that is not in a transaction: its
   * effect would commit at once, whatever the caller's transaction then does. A read need not be
   * in one. The CLS one is, by construction (only an active transaction is taken).
   * @internal
   */
  protected target(t: TransactionTarget | undefined, use?: TransactionUse): SqlExecutor | undefined {
    const exec = (use ? transactionExecutorFor(t, use) : executorFor(t)) ?? this.ambient();
    return exec && this.onOwnDatabase ? this.onOwnDatabase(exec) : exec;
  }

  /**
   * Reports the rows an add actually inserted (metrics: pgqueue_jobs_enqueued_total). An add
   * whose uniqueKey found a live job, or replaced a waiting one, added no job: not counted.
   * @internal
   */
  protected enqueued(rows: readonly { name: string }[]): void {
    // Counting per name costs a pass over the batch: only when someone (metrics) listens.
    if (!this.onEnqueued || !this.wantsEnqueued()) return;
    const byName = new Map<string, number>();
    for (const r of rows) byName.set(r.name, (byName.get(r.name) ?? 0) + 1);
    for (const [name, count] of byName) this.onEnqueued(this.name, name, count);
  }
}
