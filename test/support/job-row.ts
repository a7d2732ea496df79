import type { ClaimedRow, NewJobRow } from '../../lib/db/job-store';

/** A row as the producer hands it to the store (job options at their defaults), with `over` applied. */
export function jobRow(over: Partial<NewJobRow> = {}): NewJobRow {
  const payload = over.payload ?? {};
  return {
    queue: 'q',
    name: 'n',
    payload,
    payloadJson: JSON.stringify(payload),
    priority: 0,
    runAt: null,
    delayMs: 0,
    maxAttempts: 3,
    backoff: null,
    timeoutMs: null,
    uniqueKey: null,
    replaceWaiting: false,
    traceJson: null,
    dedupKey: null,
    dedupTtlMs: 0,
    group: null,
    ...over,
  };
}

/** A row as the claim returns it: a first attempt of job 42 ('send', no group, no options), with `over` on top. */
export function claimedRow(over: Partial<ClaimedRow> = {}): ClaimedRow {
  return {
    id: '42',
    group_key: null,
    name: 'send',
    payload: {},
    priority: 0,
    unique_key: null,
    attempt: 1,
    max_attempts: 3,
    backoff: null,
    timeout_ms: null,
    progress: null,
    errors: null,
    trace: null,
    cancel_requested: null,
    run_at_ms: 0,
    created_at_ms: 0,
    started_at_ms: 0,
    ...over,
  };
}
