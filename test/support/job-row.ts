import type { NewJobRow } from '../../lib/db/job-store';

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
