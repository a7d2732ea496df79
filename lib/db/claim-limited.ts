import { PgQueueError } from '../core/errors';
import { runClaim, type ClaimedRow } from './claim';
import { advisoryLockHolders, describeHolders } from './lock-holders';
import type { SchemaSql, StoreContext } from './store-context';
import { lockKey } from './transaction';

/** The claim of a queue with globalConcurrency or a limiter: its lock, the limits' state, and the starts it records. */
export function limitedClaimStatements({ s, jobs }: SchemaSql) {
  return {
    /**
     * Claims of a queue with globalConcurrency or a limiter run one at a time across all nodes,
     * under this transaction-scoped lock; each statement after it reads a fresh snapshot (READ
     * COMMITTED), so it counts the running jobs other nodes' claims just committed. $1 key
     *
     * Any role that can connect may take this key too, and a session holding it stopped the
     * queue's claims for as long as it did, silently: the wait is bounded by a lock_timeout set
     * in the same statement (the target list runs left to right), so an uncontended claim costs
     * no round trip more than before. A row lock on a table only the app may update would keep
     * other roles out, but writes the tuple's xmax on every claim, where an advisory lock writes
     * nothing. Measured (pgbench, 5000 transactions of the lock alone, one client, PostgreSQL 15,
     * a loaded 2-core machine): this statement 0.24-0.70 ms and 88-324 kB of WAL in all;
     * SELECT ... FOR UPDATE of one row 4.5-5.0 ms and 16-37 MB of WAL (3-7 kB per transaction,
     * full-page images included; the claim writes WAL anyway, but not that much more per claim). It stays for the transaction (the
     * rate window's upsert on the queues row waits under the same bound). $2 lock_timeout
     */
    lockQueueClaims: `SELECT pg_catalog.set_config('lock_timeout', $2, true), pg_catalog.pg_advisory_xact_lock($1::bigint)`,

    /**
     * What the limits allow now: jobs of the queue running anywhere, the global concurrency
     * stored by queue.setGlobalConcurrency (read here, under the lock, so every node's claim
     * respects the value committed last, whatever it has heard), starts within the rate window,
     * and how long until the oldest of those leaves it. $1 queue $2 window ms (NULL: none)
     * The window ends at now(), the transaction's start, which is what the claim stamps as the
     * jobs' started_at, and recordStarts records that too: so the limit holds for the start times
     * stored on the jobs. With clock_timestamp() here, a claim delayed between BEGIN and this
     * statement (a stalled event loop) let 8 jobs of a 4-per-second limit show started_at within
     * one second (test/integration/limits.int-spec.ts, a 40 ms stall on every other claim).
     */
    limitState: `
      WITH q AS (
        SELECT coalesce((SELECT recent_starts FROM ${s}.queues WHERE name = $1), '{}') AS starts
      ), win AS (
        SELECT t FROM q, pg_catalog.unnest(q.starts) t WHERE $2::bigint IS NOT NULL AND t > now() - $2::bigint::float8 * interval '1 millisecond'
      )
      SELECT (SELECT count(*) FROM ${jobs} WHERE queue = $1 AND state = 'active')::int AS active,
             (SELECT global_concurrency FROM ${s}.queues WHERE name = $1) AS stored_global,
             (SELECT count(*) FROM win)::int AS recent,
             (SELECT extract(epoch FROM pg_catalog.min(t) + $2::bigint::float8 * interval '1 millisecond' - now())::float8 * 1000::float8 FROM win) AS next_free_ms`,

    /**
     * Records $2 starts of a rate-limited queue, keeping the newest $4 within the window. $1 queue $3 window ms
     * array_cat, not ||: pg_catalog's array || array is polymorphic (anycompatiblearray), so an
     * operator ||(timestamptz[], timestamptz[]) planted on the search_path was chosen over it.
     */
    recordStarts: `
      INSERT INTO ${s}.queues AS q (name, recent_starts) VALUES ($1, pg_catalog.array_fill(now(), ARRAY[$2::int]))
      ON CONFLICT (name) DO UPDATE SET recent_starts = (
        SELECT coalesce(pg_catalog.array_agg(t ORDER BY t), '{}') FROM (
          SELECT t FROM pg_catalog.unnest(pg_catalog.array_cat(q.recent_starts, pg_catalog.array_fill(now(), ARRAY[$2::int]))) t
          WHERE t > now() - $3::bigint::float8 * interval '1 millisecond'
          ORDER BY t DESC LIMIT $4) newest)`,
  };
}

/**
 * How long a limited queue's claim waits for the queue's claim lock. Other nodes' claims hold it
 * for a few milliseconds each, so a wait this long means a session holds it for something else
 * (another role's session, a stuck transaction): the claim fails, naming it, and the worker
 * tries again at its next wake-up.
 */
export const LIMITED_CLAIM_LOCK_TIMEOUT_MS = 5000;

/** Claims of queues with limits, one at a time across all nodes per queue. */
export class LimitedClaims {
  private readonly q: ReturnType<typeof limitedClaimStatements>;

  constructor(
    private readonly ctx: StoreContext,
    /** The plain claim (claim.ts), run here inside the lock's transaction. */
    private readonly claimSql: string,
  ) {
    this.q = limitedClaimStatements(ctx.sql);
  }

  /**
   * The claim of a queue with globalConcurrency or a limiter: serialised across nodes by a
   * per-queue advisory lock, it claims no more than the limits allow. `retryInMs`: when the rate
   * limit is what stopped it, how long until a start is allowed again.
   */
  async claimLimited(
    queue: string,
    free: number,
    workerId: string,
    leaseMs: number,
    limits: { globalConcurrency: number | null; limiter: { max: number; durationMs: number } | null },
  ): Promise<{ rows: ClaimedRow[]; retryInMs: number | null }> {
    const key = lockKey(`nestjs-pg-queue:limits:${this.ctx.schema}:${queue}`);
    try {
      return await this.claimUnderLock(key, queue, free, workerId, leaseMs, limits);
    } catch (err) {
      if ((err as { code?: string }).code !== '55P03') throw err;
      // The transaction is over (rolled back, nothing claimed): ask who holds the lock now.
      const holders = await advisoryLockHolders(this.ctx.db, key).catch(() => []);
      throw new PgQueueError(
        `Claims of queue "${queue}" waited ${LIMITED_CLAIM_LOCK_TIMEOUT_MS} ms for the queue's claim lock, held by ` +
          `${describeHolders(holders)}. Claims of a queue with globalConcurrency or a limiter take it for milliseconds: ` +
          'a longer hold is a stuck transaction or a session that is not a node of this app (docs/security.md).',
        { cause: err },
      );
    }
  }

  private claimUnderLock(
    key: string,
    queue: string,
    free: number,
    workerId: string,
    leaseMs: number,
    limits: { globalConcurrency: number | null; limiter: { max: number; durationMs: number } | null },
  ): Promise<{ rows: ClaimedRow[]; retryInMs: number | null }> {
    return this.ctx.transaction(async (client) => {
      await client.query(this.q.lockQueueClaims, [key, `${LIMITED_CLAIM_LOCK_TIMEOUT_MS}ms`]);
      const { limiter, globalConcurrency } = limits;
      const {
        rows: [st],
      } = await client.query<{ active: number; stored_global: number | null; recent: number; next_free_ms: number | null }>(
        this.q.limitState,
        [queue, limiter?.durationMs ?? null],
      );
      let allowed = free;
      // The stored value (setGlobalConcurrency) takes precedence over the option (docs/flow-control.md).
      const cap = st.stored_global ?? globalConcurrency;
      if (cap !== null) allowed = Math.min(allowed, cap - st.active);
      let retryInMs: number | null = null;
      if (limiter) {
        const left = limiter.max - st.recent;
        if (left < allowed) retryInMs = Math.max(1, Math.ceil(st.next_free_ms ?? limiter.durationMs));
        allowed = Math.min(allowed, left);
      }
      let rows: ClaimedRow[] = [];
      if (allowed > 0) {
        rows = await runClaim(client, this.claimSql, [queue, allowed, workerId, leaseMs]);
        if (limiter && rows.length)
          await client.query(this.q.recordStarts, [queue, rows.length, limiter.durationMs, limiter.max]);
      }
      return { rows, retryInMs };
    });
  }
}
