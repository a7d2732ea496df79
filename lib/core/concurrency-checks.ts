import { PgQueueConfigError } from './errors';
import { quote } from './input-text';

/** Most jobs one process runs at once per queue: the bound of the `concurrency` option. */
export const MAX_NODE_CONCURRENCY = 1000;

/**
 * `value` as a concurrency given at runtime (setConcurrency, setGlobalConcurrency): a whole
 * number from 1 to `max`; else PgQueueConfigError naming the call and what to pass.
 */
export function checkConcurrency(where: string, value: unknown, max: number): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= max) return value;
  throw new PgQueueConfigError(
    `${where}: ${quote(value)} is not a concurrency. Pass a whole number from 1 to ${max}` +
      (where.includes('Global') ? ', or removeGlobalConcurrency() (null) to drop the stored value.' : '.'),
  );
}
