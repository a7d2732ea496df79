import { ObliterateRefusedError } from '../core/errors';
import type { LiveSelection, LiveWalks } from './bulk-live';
import { ID_START } from './keyset';
import type { SchemaSql, StoreContext } from './store-context';

/**
 * Rows one statement of clean, drain or obliterate touches at most. Each statement is its own
 * short transaction (autocommit on the queue's pool), and the caller loops until a statement
 * finds nothing: no statement locks more than this many rows, so a drain of a million jobs
 * never holds the claim index or the history for long, and a crash in the middle leaves only
 * whole batches done, which a rerun finishes.
 */
export const CLEAN_BATCH = 1000;

/** The live states drain and obliterate remove, each walked through its own partial index (bulk-live.ts). */
export type LiveState = 'waiting' | 'waiting-children' | 'active';

/** drain's 'waiting' is every job in state 'waiting', due or delayed: the walk over both. */
const WALK_OF: Readonly<Record<LiveState, LiveSelection>> = {
  waiting: 'queued',
  'waiting-children': 'waiting-children',
  active: 'active',
};

/** clean(), drain() and obliterate(): the operator's bulk removals, a batch per statement. */
export function cleanStatements({ jobs, history }: SchemaSql) {
  return {
    /**
     * queue.clean(): finished jobs of one state older than an age. The batch's ids are picked
     * once (an InitPlan: the history's (queue, state, id) index, migration 0007), then deleted by
     * each partition's id index: as `id IN (subquery)`, a history without statistics yet was
     * planned as a nested loop that read the subquery again for every row. Each batch starts
     * after the last id of the one before (keyset.ts): without that, each batch read again the
     * index entries of every row the batches before it deleted. $1 queue $2 state $3 older than
     * (ms) $4 batch $5 after id
     */
    cleanHistory: `
      WITH picked AS (
        SELECT id FROM ${history}
        WHERE queue = $1 AND state = $2 AND id > $5::bigint AND finished_at < now() - $3::bigint::float8 * interval '1 millisecond'
        ORDER BY id LIMIT $4
      ), gone AS (
        DELETE FROM ${history} WHERE queue = $1 AND state = $2 AND id = ANY(ARRAY(SELECT id FROM picked)) RETURNING 1
      )
      SELECT (SELECT count(*) FROM gone)::int AS n, (SELECT count(*) FROM picked)::int AS found,
             (SELECT pg_catalog.max(id)::text FROM picked) AS last`,

    /**
     * obliterate(): a batch of the queue's history, whatever its state, in (state, id) order
     * after $3, $4: the same index, walked from where the last batch ended. $1 queue $2 batch
     */
    obliterateHistory: `
      WITH picked AS (
        SELECT state, id FROM ${history} WHERE queue = $1 AND (state, id) > ($3::text, $4::bigint) ORDER BY state, id LIMIT $2
      ), gone AS (
        DELETE FROM ${history} WHERE queue = $1 AND id = ANY(ARRAY(SELECT id FROM picked)) RETURNING 1
      )
      SELECT (SELECT count(*) FROM gone)::int AS n, (SELECT count(*) FROM picked)::int AS found,
             (SELECT pg_catalog.json_build_array(state, id::text) FROM picked ORDER BY state DESC, id DESC LIMIT 1) AS last`,

    /** How many jobs of queue $1 run now (obliterate refuses while any do). */
    activeCount: `SELECT count(*)::int AS n FROM ${jobs} WHERE queue = $1 AND state = 'active'`,
  };
}

/** The bulk removals of one queue, each a loop of short statements on the queue's pool. */
export class Cleaner {
  private readonly q: ReturnType<typeof cleanStatements>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly walks: LiveWalks,
    private readonly batch = CLEAN_BATCH,
  ) {
    this.q = cleanStatements(ctx.sql);
  }

  /** Removes finished jobs of `state` older than `olderThanMs`, at most `limit` (null: all). Returns how many. */
  async cleanHistory(queue: string, state: string, olderThanMs: number, limit: number | null): Promise<number> {
    let total = 0;
    let after = ID_START;
    for (;;) {
      const want = limit === null ? this.batch : Math.min(this.batch, limit - total);
      if (want <= 0) return total;
      const [r] = await this.ctx.db.query<{ n: number; found: number; last: string | null }>(this.q.cleanHistory, [
        queue,
        state,
        olderThanMs,
        want,
        after,
      ]);
      total += r.n;
      if (r.found < want || r.last === null) return total;
      after = r.last;
    }
  }

  /**
   * Removes every live job of `queue` in `state` (skipping rows another transaction holds at that
   * moment): the jobs no other job waits on a batch at a time, then those one is waiting on, one
   * per statement (bulk-live.ts). Returns how many.
   */
  removeLive(queue: string, state: LiveState): Promise<number> {
    return this.walks.remove(queue, WALK_OF[state], null);
  }

  /** Removes every finished job of `queue`, a batch at a time. Returns how many. */
  async removeHistory(queue: string): Promise<number> {
    let total = 0;
    let after: [string, string] = ['', ID_START];
    for (;;) {
      const [r] = await this.ctx.db.query<{ n: number; found: number; last: [string, string] | null }>(this.q.obliterateHistory, [
        queue,
        this.batch,
        ...after,
      ]);
      total += r.n;
      if (r.found < this.batch || r.last === null) return total;
      after = r.last;
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
