import { ObliterateRefusedError } from '../core/errors';
import type { SchemaSql, StoreContext } from './store-context';

/**
 * Rows one statement of clean, drain or obliterate touches at most. Each statement is its own
 * short transaction (autocommit on the queue's pool), and the caller loops until a statement
 * finds nothing: no statement locks more than this many rows, so a drain of a million jobs
 * never holds the claim index or the history for long, and a crash in the middle leaves only
 * whole batches done, which a rerun finishes.
 */
export const CLEAN_BATCH = 1000;

/** The live states drain and obliterate remove, each read through its own partial index. */
export type LiveState = 'waiting' | 'waiting-children' | 'active';

/**
 * Deletes up to $2 live jobs of queue $1 in `state` that no other job waits on, skipping rows
 * another transaction holds (a claim in flight): FOR UPDATE rechecks the state of a row that
 * changed after the snapshot, so a job a worker claimed meanwhile is never taken for a waiting
 * one. `queue = $1 AND state = '...'` matches a partial index per state (jobs_claim_idx,
 * jobs_waiting_children_idx, jobs_active_idx), so each batch starts where the rows are.
 */
function liveBatchSql(jobs: string, state: LiveState): string {
  return `
      WITH picked AS (
        SELECT id FROM ${jobs} WHERE queue = $1 AND state = '${state}' AND NOT has_dependents LIMIT $2 FOR UPDATE SKIP LOCKED
      ), gone AS (
        DELETE FROM ${jobs} j USING picked p WHERE j.id = p.id AND j.state = '${state}' RETURNING j.id
      )
      SELECT count(*)::int AS n FROM gone`;
}

/**
 * The same for one job another job waits on (a flow's child, a `dependsOn` target), one per
 * statement: the trigger of migration 0008 tells its parents it was removed (not completed) only
 * for the id named in the transaction-local setting, as queue.remove() does.
 */
function liveOneSql(jobs: string, state: LiveState): string {
  return `
      WITH picked AS (
        SELECT id FROM ${jobs} WHERE queue = $1 AND state = '${state}' AND has_dependents LIMIT 1 FOR UPDATE SKIP LOCKED
      ), gone AS (
        DELETE FROM ${jobs} j USING picked p WHERE j.id = p.id AND j.state = '${state}' RETURNING j.id
      )
      SELECT (SELECT count(*) FROM gone)::int AS n,
             pg_catalog.set_config('pgqueue.removing_job', coalesce((SELECT id::text FROM gone), ''), true) IS NOT NULL AS marked`;
}

/** clean(), drain() and obliterate(): the operator's bulk removals, a batch per statement. */
export function cleanStatements({ jobs, history }: SchemaSql) {
  return {
    /**
     * queue.clean(): finished jobs of one state older than an age. The batch's ids are picked
     * once (an InitPlan: the history's (queue, state, id) index, migration 0007), then deleted by
     * each partition's id index: as `id IN (subquery)`, a history without statistics yet was
     * planned as a nested loop that read the subquery again for every row.
     * $1 queue $2 state $3 older than (ms) $4 batch
     */
    cleanHistory: `
      WITH gone AS (
        DELETE FROM ${history} WHERE queue = $1 AND state = $2 AND id = ANY(ARRAY(
          SELECT id FROM ${history}
          WHERE queue = $1 AND state = $2 AND finished_at < now() - $3::bigint::float8 * interval '1 millisecond'
          LIMIT $4))
        RETURNING 1
      )
      SELECT count(*)::int AS n FROM gone`,

    /** obliterate(): a batch of the queue's history, whatever its state. $1 queue $2 batch */
    obliterateHistory: `
      WITH gone AS (
        DELETE FROM ${history} WHERE queue = $1 AND id = ANY(ARRAY(SELECT id FROM ${history} WHERE queue = $1 LIMIT $2)) RETURNING 1
      )
      SELECT count(*)::int AS n FROM gone`,

    /** How many jobs of queue $1 run now (obliterate refuses while any do). */
    activeCount: `SELECT count(*)::int AS n FROM ${jobs} WHERE queue = $1 AND state = 'active'`,

    liveBatch: {
      waiting: liveBatchSql(jobs, 'waiting'),
      'waiting-children': liveBatchSql(jobs, 'waiting-children'),
      active: liveBatchSql(jobs, 'active'),
    } satisfies Record<LiveState, string>,
    liveOne: {
      waiting: liveOneSql(jobs, 'waiting'),
      'waiting-children': liveOneSql(jobs, 'waiting-children'),
      active: liveOneSql(jobs, 'active'),
    } satisfies Record<LiveState, string>,
  };
}

/** The bulk removals of one queue, each a loop of short statements on the queue's pool. */
export class Cleaner {
  private readonly q: ReturnType<typeof cleanStatements>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly batch = CLEAN_BATCH,
  ) {
    this.q = cleanStatements(ctx.sql);
  }

  /** Removes finished jobs of `state` older than `olderThanMs`, at most `limit` (null: all). Returns how many. */
  async cleanHistory(queue: string, state: string, olderThanMs: number, limit: number | null): Promise<number> {
    let total = 0;
    for (;;) {
      const want = limit === null ? this.batch : Math.min(this.batch, limit - total);
      if (want <= 0) return total;
      const n = await this.counted(this.q.cleanHistory, [queue, state, olderThanMs, want]);
      total += n;
      if (n < want) return total;
    }
  }

  /**
   * Removes every live job of `queue` in `state` (skipping rows another transaction holds at that
   * moment): the jobs no other job waits on a batch at a time, then those one is waiting on, one
   * per statement. Returns how many.
   */
  async removeLive(queue: string, state: LiveState): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.counted(this.q.liveBatch[state], [queue, this.batch]);
      total += n;
      // A short batch may still leave rows: ones skipped while locked. The loop ends on an empty one.
      if (n === 0) break;
    }
    for (;;) {
      const n = await this.counted(this.q.liveOne[state], [queue]);
      total += n;
      if (n === 0) return total;
    }
  }

  /** Removes every finished job of `queue`, a batch at a time. Returns how many. */
  async removeHistory(queue: string): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.counted(this.q.obliterateHistory, [queue, this.batch]);
      total += n;
      if (n < this.batch) return total;
    }
  }

  /** How many jobs of `queue` are running. */
  activeCount(queue: string): Promise<number> {
    return this.counted(this.q.activeCount, [queue]);
  }

  /**
   * Removes every job of `queue`, live and finished; refuses (ObliterateRefusedError) while jobs
   * of it run, unless `force`. Live jobs go first, running ones last, then the history: a job a
   * worker claims meanwhile is caught by the check at the end (or, with force, by the pass over
   * running jobs). The queue's paused flag is kept. Returns how many jobs were removed.
   */
  async obliterate(queue: string, force: boolean): Promise<number> {
    if (!force) {
      const active = await this.activeCount(queue);
      if (active > 0) throw new ObliterateRefusedError(queue, active, false);
    }
    let total = (await this.removeLive(queue, 'waiting')) + (await this.removeLive(queue, 'waiting-children'));
    if (force) total += await this.removeLive(queue, 'active');
    total += await this.removeHistory(queue);
    if (!force) {
      const active = await this.activeCount(queue);
      if (active > 0) throw new ObliterateRefusedError(queue, active, true);
    }
    return total;
  }

  private async counted(sql: string, params: readonly unknown[]): Promise<number> {
    const [r] = await this.ctx.db.query<{ n: number }>(sql, params);
    return r.n;
  }
}
