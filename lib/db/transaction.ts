import type { PgPool, PgPoolClient } from '../core/pg-types';

function ignoreError(): void {}

/**
 * Runs `fn` in a transaction on one pool connection: COMMIT after it, ROLLBACK if it throws.
 * The one place BEGIN, COMMIT and ROLLBACK are written (the claim under limits, maintenance,
 * history partition steps, migrations). A checked-out client has no error listener: a backend
 * killed between two statements would otherwise emit an unhandled 'error' and crash the process
 * (the failed query reports it). `mapError`: what to throw, after the ROLLBACK, instead of an
 * error of the transaction (not of the connect before it).
 */
export async function inTransaction<T>(
  pool: PgPool,
  fn: (client: PgPoolClient) => Promise<T>,
  mapError?: (err: unknown) => Error,
): Promise<T> {
  const client = await pool.connect();
  client.on('error', ignoreError);
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw mapError ? mapError(err) : err;
  } finally {
    client.off('error', ignoreError);
    client.release();
  }
}

/** A 63-bit advisory lock key derived from a string, identical on every node. */
export function lockKey(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const c of Buffer.from(text)) h = ((h ^ BigInt(c)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return (h & 0x7fffffffffffffffn).toString();
}
