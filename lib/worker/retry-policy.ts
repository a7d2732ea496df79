import { toStorableJson } from '../db/jsonb';
import type { JobAttemptError } from '../core/job';
import type { ResolvedBackoff } from '../core/options/resolved';

/**
 * Milliseconds to wait after attempt `attempt` (1-based) failed. Exponential doubles from
 * `delayMs`; both are capped by `maxDelayMs`; jitter spreads the delay over [d/2, d].
 */
export function backoffDelayMs(b: ResolvedBackoff, attempt: number, random: () => number = Math.random): number {
  const raw = b.type === 'fixed' ? b.delayMs : b.delayMs * 2 ** Math.min(Math.max(attempt - 1, 0), 52);
  const capped = Math.min(raw, b.maxDelayMs);
  return Math.round(b.jitter ? capped / 2 + random() * (capped / 2) : capped);
}

/**
 * Records what a handler threw, Error or not, as the attempt's error. Never throws itself: a
 * value that can be neither serialised nor printed (a null-prototype object holding a BigInt,
 * a getter that throws) must still fail the attempt, not leave its outcome unwritten.
 */
export function toAttemptError(thrown: unknown, attempt: number, at = new Date()): JobAttemptError {
  if (thrown instanceof Error) {
    try {
      const { name, message, stack } = thrown;
      return {
        attempt,
        name: String(name),
        message: String(message),
        stack: stack === undefined ? undefined : String(stack),
        at: at.toISOString(),
      };
    } catch {
      return {
        attempt,
        name: 'Error',
        message: 'Handler threw an Error whose name, message or stack cannot be read',
        at: at.toISOString(),
      };
    }
  }
  let message: string;
  try {
    message = typeof thrown === 'string' ? thrown : (JSON.stringify(thrown) ?? String(thrown));
  } catch {
    try {
      message = String(thrown);
    } catch {
      message = Object.prototype.toString.call(thrown);
    }
  }
  return { attempt, name: 'NonError', message: `Handler threw a non-Error value: ${message}`, at: at.toISOString() };
}

/** Serialises an attempt error for storage; what jsonb refuses (NUL, lone surrogates) becomes U+FFFD. */
export function attemptErrorJson(e: JobAttemptError): string {
  return toStorableJson(JSON.stringify(e));
}
