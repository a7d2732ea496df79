import type { ClaimedRow } from './claim';
import type { SchemaSql, StoreContext } from './store-context';
import { lockKey } from './transaction';

/** The claim of a queue with globalConcurrency or a limiter: its lock, the limits' state, and the starts it records. */
export function limitedClaimStatements({ s, jobs }: SchemaSql) {
  return {
    /**
     * Claims of a queue with globalConcurrency or a limiter run one at a time across all nodes,
     * under this transaction-scoped lock; each statement after it reads a fresh snapshot (READ
     * COMMITTED), so it counts the running jobs other nodes' claims just committed. $1 key
     */
    lockQueueClaims: `SELECT pg_advisory_xact_lock($1::bigint)`,

    /**
     * What the limits allow now: jobs of the queue running anywhere, starts within the rate
     * window, and how long until the oldest of those leaves it. $1 queue $2 window ms (NULL: none)
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
        SELECT t FROM q, unnest(q.starts) t WHERE $2::bigint IS NOT NULL AND t > now() - $2::bigint::float8 * interval '1 millisecond'
      )
      SELECT (SELECT count(*) FROM ${jobs} WHERE queue = $1 AND state = 'active')::int AS active,
             (SELECT count(*) FROM win)::int AS recent,
             (SELECT extract(epoch FROM min(t) + $2::bigint::float8 * interval '1 millisecond' - now())::float8 * 1000::float8 FROM win) AS next_free_ms`,

    /** Records $2 starts of a rate-limited queue, keeping the newest $4 within the window. $1 queue $3 window ms */
    recordStarts: `
      INSERT INTO ${s}.queues AS q (name, recent_starts) VALUES ($1, array_fill(now(), ARRAY[$2::int]))
      ON CONFLICT (name) DO UPDATE SET recent_starts = (
        SELECT coalesce(array_agg(t ORDER BY t), '{}') FROM (
          SELECT t FROM unnest(q.recent_starts || array_fill(now(), ARRAY[$2::int])) t
          WHERE t > now() - $3::bigint::float8 * interval '1 millisecond'
          ORDER BY t DESC LIMIT $4) newest)`,
  };
}

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
    return this.ctx.transaction(async (client) => {
      await client.query(this.q.lockQueueClaims, [lockKey(`nestjs-pg-queue:limits:${this.ctx.schema}:${queue}`)]);
      const { limiter, globalConcurrency } = limits;
      const {
        rows: [st],
      } = await client.query<{ active: number; recent: number; next_free_ms: number | null }>(this.q.limitState, [
        queue,
        limiter?.durationMs ?? null,
      ]);
      let allowed = free;
      if (globalConcurrency !== null) allowed = Math.min(allowed, globalConcurrency - st.active);
      let retryInMs: number | null = null;
      if (limiter) {
        const left = limiter.max - st.recent;
        if (left < allowed) retryInMs = Math.max(1, Math.ceil(st.next_free_ms ?? limiter.durationMs));
        allowed = Math.min(allowed, left);
      }
      let rows: ClaimedRow[] = [];
      if (allowed > 0) {
        rows = (await client.query<ClaimedRow>(this.claimSql, [queue, allowed, workerId, leaseMs])).rows;
        if (limiter && rows.length)
          await client.query(this.q.recordStarts, [queue, rows.length, limiter.durationMs, limiter.max]);
      }
      return { rows, retryInMs };
    });
  }
}
