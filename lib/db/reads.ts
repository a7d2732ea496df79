import type { GroupCountsOrder, QueueGroupCounts } from '../core/group-counts';
import type { Job, QueueCounts } from '../core/job';
import type { SqlExecutor } from './executor';
import type { FlowStore } from './flows';
import { groupCountsSql, readGroupCounts } from './group-counts';
import { historyByIdParamSql, isUndefinedTable, type HistoryLayoutCache } from './history/by-id';
import { isJobId } from '../core/names';
import { byLayout, HISTORY_COLS, LIVE_COLS, rowToJob, type JobRow } from './job-row';
import { schemaSql, type StoreContext } from './store-context';

/**
 * The live counts per queue (waiting, delayed, active, stalled, oldest waiting age) as a
 * subquery, for `counts` here and the dashboard's. It reads only columns of the partial indexes,
 * so each half is an index-only scan: jobs_claim_idx (queue, priority, run_at, id) WHERE
 * state = 'waiting' has run_at for the waiting/delayed split and the oldest age; jobs_active_idx
 * (queue, locked_until) WHERE state = 'active' has the lease for stalled. The former single pass
 * over jobs read every heap page (payloads included) for one queue too: a queue page's counts
 * went from 69 to 18-27 ms at p95 with 100,000 waiting jobs (bench/dashboard-plans.mjs).
 * The waiting half finds its queues by a skip scan (PostgreSQL has none before 18): a recursive
 * CTE probes jobs_claim_idx for the next queue name (for one queue, it starts and ends at that
 * queue, a queue without waiting jobs counting 0), then counts each queue on that index. A
 * GROUP BY over all queues got a parallel seq scan of jobs instead, whose worker start alone
 * cost tens of ms on a loaded machine: 23 / 45 ms p50 / p95 against 16 / 25 ms here, with
 * 100,000 waiting jobs in two queues (2 cores, shared). The active half stays a GROUP BY: it
 * has as many entries as jobs running now. An index-only scan visits a heap page that is not
 * all-visible; autovacuum runs early on jobs. `queueParam` is the bind parameter of one queue,
 * or NULL for all.
 *
 * Parked jobs (job.sleep(), job.waitFor()) are `waiting` rows due later, so the waiting half
 * counts them as delayed; a third half counts them from job_steps_parked_idx (migration 19: the
 * steps rows of sleeps and waits not yet over, a range scan on wake_at) joined to their job by
 * primary key, and takes them out of delayed into `sleeping` and `waiting_signal`. Its cost
 * follows the parked jobs only. EXPLAIN ANALYZE with 100,000 jobs, 1,000 of them parked, and
 * 20,000 sleeps long over in job_steps: this half took 4.6 ms for all queues (Bitmap Index Scan
 * on job_steps_parked_idx, 1,000 rows, then jobs_pkey per row) and 2.8 ms for one (hash join
 * with that queue's delayed entries of jobs_claim_idx, index-only); no sequential scan.
 * `s` is the escaped schema.
 */
export function liveCountsSql(jobs: string, queueParam: string, s: string): string {
  return `
    WITH RECURSIVE waiting_queues AS (
      SELECT coalesce(${queueParam}::text, (SELECT pg_catalog.min(queue) FROM ${jobs} WHERE state = 'waiting')) AS queue
      UNION ALL
      SELECT (SELECT j.queue FROM ${jobs} j WHERE j.state = 'waiting' AND j.queue > w.queue AND ${queueParam}::text IS NULL
              ORDER BY j.queue LIMIT 1)
      FROM waiting_queues w WHERE w.queue IS NOT NULL
    )
    SELECT queue, pg_catalog.sum(waiting)::bigint AS waiting, pg_catalog.sum(delayed)::bigint AS delayed, pg_catalog.sum(active)::bigint AS active,
           pg_catalog.sum(stalled)::bigint AS stalled, extract(epoch FROM now() - pg_catalog.min(oldest))::float8 * 1000::float8 AS oldest_waiting_age_ms,
           pg_catalog.sum(sleeping)::bigint AS sleeping, pg_catalog.sum(waiting_signal)::bigint AS waiting_signal
    FROM (
      SELECT w.queue, c.waiting, c.delayed, 0 AS active, 0 AS stalled, c.oldest, 0 AS sleeping, 0 AS waiting_signal
      FROM waiting_queues w CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE run_at <= now()) AS waiting, count(*) FILTER (WHERE run_at > now()) AS delayed,
               pg_catalog.min(run_at) FILTER (WHERE run_at <= now()) AS oldest
        FROM ${jobs} WHERE state = 'waiting' AND queue = w.queue) c
      WHERE w.queue IS NOT NULL
      UNION ALL
      SELECT queue, 0, 0, count(*), count(*) FILTER (WHERE locked_until < now()), NULL, 0, 0
      FROM ${jobs} WHERE state = 'active' AND (${queueParam}::text IS NULL OR queue = ${queueParam}) GROUP BY queue
      UNION ALL
      SELECT j.queue, 0, -count(*), 0, 0, NULL, count(*) FILTER (WHERE p.status = 'sleeping'),
             count(*) FILTER (WHERE p.status = 'waiting')
      FROM ${s}.job_steps p JOIN ${jobs} j ON j.id = p.job_id
      WHERE p.status IN ('sleeping', 'waiting') AND (p.wake_at > now() OR (p.wake_at IS NULL AND p.status = 'waiting'))
        AND j.state = 'waiting' AND j.run_at > now() AND (${queueParam}::text IS NULL OR j.queue = ${queueParam})
      GROUP BY j.queue
    ) l GROUP BY queue`;
}

/**
 * Jobs waiting on their children, per queue, from jobs_waiting_children_idx (which holds only
 * them): an index-only count. Kept apart from liveCountsSql, whose two halves read the claim and
 * active indexes. `queueParam` as there.
 */
export function waitingChildrenSql(jobs: string, queueParam: string): string {
  return `
    SELECT queue, count(*)::bigint AS waiting_children FROM ${jobs}
    WHERE state = 'waiting-children' AND (${queueParam}::text IS NULL OR queue = ${queueParam}) GROUP BY queue`;
}

/** Reads of jobs and figures: a job by id, counts per queue; and the tests' fast-forward. */
export function readStatements(schema: string) {
  const { s, jobs, history } = schemaSql(schema);
  return {
    /**
     * Per-queue figures for health probes and metrics, in one statement: the live table holds
     * only the backlog, and failed jobs are counted from a partial index. $1 queue or NULL (all)
     */
    counts: `
      WITH live AS (${liveCountsSql(jobs, '$1', s)}
      ), failed AS (
        SELECT queue, count(*) AS failed FROM ${history}
        WHERE state = 'failed' AND ($1::text IS NULL OR queue = $1) GROUP BY queue
      ), parents AS (${waitingChildrenSql(jobs, '$1')})
      SELECT coalesce(l.queue, f.queue, w.queue) AS queue, coalesce(l.waiting, 0)::int AS waiting,
             coalesce(l.delayed, 0)::int AS delayed, coalesce(l.active, 0)::int AS active,
             coalesce(l.stalled, 0)::int AS stalled, coalesce(f.failed, 0)::int AS failed,
             coalesce(w.waiting_children, 0)::int AS waiting_children, l.oldest_waiting_age_ms,
             coalesce(l.sleeping, 0)::int AS sleeping, coalesce(l.waiting_signal, 0)::int AS waiting_signal
      FROM live l FULL JOIN failed f ON f.queue = l.queue FULL JOIN parents w ON w.queue = coalesce(l.queue, f.queue)`,

    /** One job, live or finished. $1 id */
    getJob: `
      SELECT ${LIVE_COLS} FROM ${jobs} WHERE id = $1
      UNION ALL
      SELECT ${HISTORY_COLS} FROM ${history} WHERE id = $1`,
    /**
     * getJob for each history layout, visiting only the partitions that can hold the id: $1 id,
     * then (partitioned) the values of idLookup (history/by-id.ts).
     */
    getJobIn: byLayout((layout) =>
      layout === 'flat'
        ? `
      SELECT ${LIVE_COLS} FROM ${jobs} WHERE id = $1
      UNION ALL
      SELECT ${HISTORY_COLS} FROM ${history} WHERE id = $1`
        : `
      SELECT ${LIVE_COLS} FROM ${jobs} WHERE id = $1::bigint
      UNION ALL
      ${historyByIdParamSql(schema, HISTORY_COLS, layout)}`,
    ),

    /**
     * Tests only (nestjs-pg-queue/testing): waiting jobs due later (delayed, retry backoff,
     * snoozed, asleep in job.sleep()) become due now, so the next claim takes them; a sleep's
     * recorded wake time is brought to now as well (else the job would park again). A job parked
     * on job.waitFor() stays: it waits for queue.signal(), which wakes it.
     * $1 queue or NULL for all
     */
    makeDueWaiting: `
      WITH slept AS (
        UPDATE ${s}.job_steps st SET wake_at = now()
        FROM ${jobs} j
        WHERE st.job_id = j.id AND st.status = 'sleeping' AND st.wake_at > now()
          AND j.state = 'waiting' AND ($1::text IS NULL OR j.queue = $1)
        RETURNING st.job_id
      )
      UPDATE ${jobs} SET run_at = now()
      WHERE state = 'waiting' AND run_at > now() AND ($1::text IS NULL OR queue = $1)
        AND NOT EXISTS (SELECT 1 FROM ${s}.job_steps w WHERE w.job_id = ${jobs}.id AND w.status = 'waiting')`,
  };
}

/** Reads of jobs, on the queue's pool or on a caller's transaction. */
export class Reads {
  private readonly q: ReturnType<typeof readStatements>;

  constructor(
    private readonly ctx: StoreContext,
    /** Which statement the reads by id take (history/by-id.ts). */
    private readonly layout: HistoryLayoutCache,
    private readonly flows: FlowStore,
  ) {
    this.q = readStatements(ctx.schema);
  }

  /** Figures per queue (all queues, or one). */
  async counts(queue: string | null): Promise<Map<string, QueueCounts>> {
    const rows = await this.ctx.db.query<{
      queue: string;
      waiting: number;
      delayed: number;
      active: number;
      stalled: number;
      failed: number;
      waiting_children: number;
      oldest_waiting_age_ms: number | null;
      sleeping: number;
      waiting_signal: number;
    }>(this.q.counts, [queue]);
    return new Map(
      rows.map((r) => [
        r.queue,
        {
          waiting: r.waiting,
          delayed: r.delayed,
          active: r.active,
          stalled: r.stalled,
          failed: r.failed,
          waitingChildren: r.waiting_children,
          sleeping: r.sleeping,
          waitingSignal: r.waiting_signal,
          oldestWaitingAgeMs: r.oldest_waiting_age_ms === null ? null : Math.max(0, Math.round(r.oldest_waiting_age_ms)),
        },
      ]),
    );
  }

  /** A queue's groups, the first `top` in `orderBy`'s order (group-counts.ts: bounded scans). */
  groupCounts(queue: string, top: number, orderBy: GroupCountsOrder): Promise<QueueGroupCounts> {
    this.groupSql ??= groupCountsSql(this.ctx.schema);
    return readGroupCounts(this.ctx.db, this.groupSql, queue, top, orderBy);
  }

  private groupSql: string | null = null;

  /** Tests only: makes the waiting jobs of `queue` (null: all) that are due later due now; returns how many. */
  async makeDueWaiting(queue: string | null): Promise<number> {
    const { rowCount } = await this.ctx.pool.query(this.q.makeDueWaiting, [queue]);
    return rowCount ?? 0;
  }

  /**
   * Runs a read by id in the statement for the history's layout (history/by-id.ts); a table gone
   * since the layout was remembered (dropped by hand) makes it ask again, once.
   */
  private async byId<R>(run: () => Promise<R>): Promise<R> {
    try {
      return await run();
    } catch (err) {
      if (!isUndefinedTable(err)) throw err;
      this.layout.forget();
      return run();
    }
  }

  async getJob<T>(id: string, db: SqlExecutor = this.ctx.db): Promise<Job<T> | null> {
    if (!isJobId(id)) return null;
    // Prepared on the queue's own pool: by id, no partition of the history can be pruned, so a
    // plan is the same for every id, and planning one over 35 partitions cost 0.44 ms, four
    // times the lookup (bench/history-retention.mjs).
    const rows = await this.byId(() =>
      this.layout.read(this.q.getJobIn, id, (sql, values) =>
        db.query<JobRow>(sql, values, db === this.ctx.db ? this.ctx.name(sql) : undefined),
      ),
    );
    if (!rows.length) return null;
    const job = rowToJob<T>(rows[0]);
    // A second read (four index probes), kept out of getJob's statement: parents and dependencies.
    const flow = await this.flows.flowOf(id, db);
    return flow ? { ...job, flow } : job;
  }
}
