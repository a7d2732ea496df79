import { escapeIdentifier } from 'pg';
import type { PgPool, PgPoolClient } from '../../core/pg-types';
import { clientExecutor, poolExecutor } from '../executor';
import { advisoryLockHolders, ForeignLockWarnings } from '../lock-holders';
import { inTransaction, lockKey } from '../transaction';

/**
 * How long a partition DDL statement waits for its lock before giving up until the next pass.
 * Dropping or attaching a partition needs a short exclusive lock on its parent, which queues
 * behind any running query on job_history and holds up every history write behind it: a
 * bounded wait keeps a long report on the history from stalling completions for its length.
 */
export const PARTITION_LOCK_TIMEOUT_MS = 200;

/**
 * The history lock: each step of the partition upkeep runs in its own short transaction under
 * one advisory lock per schema, so two nodes never run DDL on the history at once (and the
 * one-time VALIDATE never holds up the rescue of other nodes, which is another lock).
 */
export class HistoryLock {
  private readonly key: string;

  constructor(
    private readonly pool: PgPool,
    private readonly schema: string,
    /**
     * Any role that can connect may take this key as well: the upkeep then stopped with no word
     * (partitions not created ahead, none dropped past retention). A holder that is not a node
     * of this app (another role or application_name) is named here, rate-limited.
     */
    private readonly foreignLocks = new ForeignLockWarnings(() => undefined),
  ) {
    this.key = lockKey(`nestjs-pg-queue:history:${schema}`);
  }

  /** A table of the schema, quoted. */
  t(name: string): string {
    return `${escapeIdentifier(this.schema)}.${escapeIdentifier(name)}`;
  }

  /**
   * Runs `fn` in a transaction holding the history lock; null when another node holds it.
   * With `waitMs`, waits that long for the lock instead (a lock timeout, 55P03, past it).
   */
  async step<T>(
    fn: (c: PgPoolClient) => Promise<T>,
    lockTimeoutMs = PARTITION_LOCK_TIMEOUT_MS,
    waitMs?: number,
  ): Promise<T | null> {
    // A step whose lock another node holds ends at once, with nothing written.
    return inTransaction(this.pool, async (c) => {
      const key = this.key;
      if (waitMs !== undefined) {
        await c.query(`SELECT pg_catalog.set_config('lock_timeout', $1, true)`, [`${waitMs}ms`]);
        await c.query(`SELECT pg_catalog.pg_advisory_xact_lock($1::bigint)`, [key]);
      } else {
        const { rows } = await c.query<{ locked: boolean }>(`SELECT pg_catalog.pg_try_advisory_xact_lock($1::bigint) AS locked`, [
          key,
        ]);
        if (!rows[0].locked) {
          this.reportForeign(await advisoryLockHolders(clientExecutor(c), key));
          return null;
        }
      }
      // Transaction-scoped (PgBouncer transaction mode keeps no session state).
      await c.query(`SELECT pg_catalog.set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
      return fn(c);
    });
  }

  /**
   * A step that gives up on a lock timeout (55P03), counted, instead of failing the pass.
   * Answers what `fn` answered, or null when the step did not run (the lock not had).
   */
  async tryStep<T>(fn: (c: PgPoolClient) => Promise<T>, result: { lockTimeouts: number }, waitMs?: number): Promise<T | null> {
    try {
      return await this.step(fn, PARTITION_LOCK_TIMEOUT_MS, waitMs);
    } catch (err) {
      if ((err as { code?: string }).code === '55P03') {
        result.lockTimeouts++;
        // Waited in vain (boot): the transaction is over, another connection asks who holds it.
        if (waitMs !== undefined)
          this.reportForeign(await advisoryLockHolders(poolExecutor(this.pool), this.key).catch(() => []));
        return null;
      }
      throw err;
    }
  }

  private reportForeign(holders: Parameters<ForeignLockWarnings['report']>[1]): void {
    this.foreignLocks.report(
      'history',
      holders,
      'the history partition upkeep (partitions created ahead, dropped past retention)',
    );
  }
}
