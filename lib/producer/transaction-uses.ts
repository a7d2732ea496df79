import type { TransactionUse } from '../db/executor';

// What each write of a queue would let escape the caller's rollback, run outside a transaction.
export const ADD: TransactionUse = { caller: 'add()', effect: 'the job' };
export const ADD_BULK: TransactionUse = { caller: 'addBulk()', effect: 'the jobs' };
export const ADD_FLOW: TransactionUse = { caller: 'addFlow()', effect: "the flow's jobs" };
export const CANCEL: TransactionUse = { caller: 'cancel()', effect: 'the cancel' };
export const RETRY: TransactionUse = { caller: 'retry()', effect: 'the retry' };
export const REMOVE: TransactionUse = { caller: 'remove()', effect: 'the removal' };
export const PROMOTE: TransactionUse = { caller: 'promote()', effect: 'the promotion' };
export const CHANGE_PRIORITY: TransactionUse = { caller: 'changePriority()', effect: 'the change' };
export const CHANGE_DELAY: TransactionUse = { caller: 'changeDelay()', effect: 'the change' };
export const UPDATE_PAYLOAD: TransactionUse = { caller: 'updatePayload()', effect: 'the new payload' };
export const REMOVE_JOBS: TransactionUse = { caller: 'removeJobs()', effect: 'the removal' };
export const CANCEL_JOBS: TransactionUse = { caller: 'cancelJobs()', effect: 'the cancel' };
export const REMOVE_DEDUPLICATION_KEY: TransactionUse = { caller: 'removeDeduplicationKey()', effect: 'the freed key' };
export const UPSERT_SCHEDULER: TransactionUse = { caller: 'upsertJobScheduler()', effect: 'the scheduler' };
export const REMOVE_SCHEDULER: TransactionUse = { caller: 'removeJobScheduler()', effect: 'the removal' };
export const SIGNAL: TransactionUse = { caller: 'signal()', effect: 'the signal' };
