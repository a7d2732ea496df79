import type { JobAttemptError } from '../job';
import type { ResolvedBackoff } from '../pg-queue.options';

/**
 * Milliseconds to wait after attempt `attempt` (1-based) failed. Exponential doubles from
 * `delayMs`; both are capped by `maxDelayMs`; jitter spreads the delay over [d/2, d].
 */
export function backoffDelayMs(b: ResolvedBackoff, attempt: number, random: () => number = Math.random): number {
  const raw = b.type === 'fixed' ? b.delayMs : b.delayMs * 2 ** Math.min(Math.max(attempt - 1, 0), 52);
  const capped = Math.min(raw, b.maxDelayMs);
  return Math.round(b.jitter ? capped / 2 + random() * (capped / 2) : capped);
}

/** Records what a handler threw, Error or not, as the attempt's error. */
export function toAttemptError(thrown: unknown, attempt: number, at = new Date()): JobAttemptError {
  if (thrown instanceof Error) {
    return { attempt, name: thrown.name, message: thrown.message, stack: thrown.stack, at: at.toISOString() };
  }
  let message: string;
  try {
    message = typeof thrown === 'string' ? thrown : (JSON.stringify(thrown) ?? String(thrown));
  } catch {
    message = String(thrown);
  }
  return { attempt, name: 'NonError', message: `Handler threw a non-Error value: ${message}`, at: at.toISOString() };
}

/** Serialises an attempt error for storage; NUL characters (which jsonb rejects) are replaced. */
export function attemptErrorJson(e: JobAttemptError): string {
  return JSON.stringify(e).replace(/\\u0000/g, '\\ufffd');
}
