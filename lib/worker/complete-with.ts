import type { JobStore } from '../db/job-store';
import { CompleteWithError, LeaseLostError, PgQueueConfigError } from '../core/errors';
import { transactionExecutorFor, type SqlExecutor, type TransactionUse } from '../db/executor';
import type { RunningJob } from './active-job';
import { storedResultJson } from './outcome';
import type { RunningSet } from './running-set';

/** job.completeWith() outside a transaction would complete the job whatever the caller's writes then do. */
const COMPLETE_WITH: TransactionUse = { caller: 'completeWith()', effect: 'the completion' };

/** What `completeWith()` needs of its worker. */
export interface CompleteWithDeps {
  readonly store: JobStore;
  readonly workerId: string;
  /** Checks a `completeWith()` transaction is on this queue's database (an app with more than one). */
  readonly onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor;
}

/**
 * job.completeWith() of every job a worker runs: one function, not a closure per job.
 * Once the attempt is settled (handler returned or threw, timeout, cancel, shutdown) the worker
 * no longer runs it: `running` holds an attempt exactly until then.
 */
export function completeWithFor(
  running: RunningSet,
  /** The progress tracker and the log buffer: what they hold of the attempt lands before the completion. */
  flushers: readonly { flush(job: RunningJob): Promise<void> | null }[],
  deps: CompleteWithDeps,
): NonNullable<RunningJob['completeIn']> {
  return async (job, target, result) => {
    const given = transactionExecutorFor(target, COMPLETE_WITH);
    if (!given) throw new PgQueueConfigError('completeWith() needs { manager } or { client } inside your transaction.');
    // A client not yet known to be in a transaction is asked first: a refusal leaves the call unmade.
    await given.ready?.();
    const entry = running.get(job.id);
    if (entry?.job !== job) throw new CompleteWithError(job.id, job.attempt, 'attempt-ended', `${job.queue}/${job.name}`);
    if (entry.completeCalled) throw new CompleteWithError(job.id, job.attempt, 'already-called', `${job.queue}/${job.name}`);
    const db = deps.onOwnDatabase ? deps.onOwnDatabase(given) : given;
    // A result JSON cannot carry throws here, before the call counts: the handler may correct it.
    const resultJson = storedResultJson(job, result);
    entry.completeCalled = true;
    // The last progress and log lines land first: the completion moves the row to history with them.
    await Promise.all(flushers.map((f) => f.flush(job)));
    if (!(await deps.store.completeInTransaction(db, job.id, deps.workerId, job.attempt, resultJson))) {
      throw new LeaseLostError(job.id);
    }
    entry.completedInTransaction = true;
  };
}
