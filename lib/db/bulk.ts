import { HistoryWalks, type FinishedState, type HistoryFilter } from './bulk-history';
import { LiveWalks, type LiveSelection } from './bulk-live';
import type { Control } from './control';
import type { SqlExecutor } from './executor';
import { publishCte, publishRef } from './events';
import { archiveCancelledSql } from './job-row';
import type { SchemaSql, StoreContext } from './store-context';

export type { FinishedState, HistoryFilter } from './bulk-history';
export type { LiveSelection } from './bulk-live';

/** Ids one statement of removeJobs({ ids }) or cancelJobs({ ids }) takes at most. */
export const IDS_BATCH = 1000;

/** The statements of removeJobs({ ids }) and cancelJobs({ ids }): one per (up to) a thousand ids. */
export function idsStatements(sql: SchemaSql) {
  const { jobs, history } = sql;
  return {
    /**
     * Waiting jobs (and those waiting on their children) no other job waits on, and finished
     * ones, of queue $2 among ids $1; never a running one (a DELETE that meets a claim in flight
     * waits for it, then rechecks the state). The live ones another job waits on are returned
     * (`oneByOne`) for queue.remove()'s statement, one each, which names the id for the trigger.
     */
    remove: `
      WITH live AS (
        DELETE FROM ${jobs} WHERE id = ANY($1::bigint[]) AND queue = $2 AND state IN ('waiting', 'waiting-children')
          AND NOT has_dependents RETURNING id
      ), done AS (DELETE FROM ${history} WHERE id = ANY($1::bigint[]) AND queue = $2 RETURNING id)
      SELECT ((SELECT count(*) FROM live) + (SELECT count(*) FROM done))::int AS n,
             ARRAY(SELECT id::text FROM ${jobs} WHERE id = ANY($1::bigint[]) AND queue = $2
                   AND state IN ('waiting', 'waiting-children') AND has_dependents) AS one_by_one`,

    /**
     * queue.cancel(id)'s statement (control.ts) over ids $1 of queue $2: rows locked in id order
     * (two calls over the same ids cannot deadlock), each cancelled in the state it has once
     * locked. $3 channel
     */
    cancel: `
      WITH target AS (
        SELECT id, state FROM ${jobs} WHERE id = ANY($1::bigint[]) AND queue = $2 ORDER BY id FOR UPDATE
      ), waiting AS (
        DELETE FROM ${jobs} j USING target t WHERE j.id = t.id AND t.state IN ('waiting', 'waiting-children') RETURNING j.*
      ), archived AS (
        ${archiveCancelledSql(history, 'waiting', 'queue.cancelJobs()')}
      ), running AS (
        UPDATE ${jobs} j SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
        FROM target t WHERE j.id = t.id AND t.state = 'active' RETURNING j.id
      ), wake AS (SELECT pg_catalog.pg_notify($3, '!cancel|' || id::text) FROM running)${publishCte(sql, 'cancelled', 'archived')}
      SELECT ((SELECT count(*) FROM archived) + (SELECT count(*) FROM running))::int AS n,
             (SELECT count(*) FROM wake)::int AS notified, ${publishRef(sql)} AS published`,
  };
}

/**
 * The operator's changes of many jobs of one queue: retryJobs, removeJobs, cancelJobs. A filter
 * walks its rows in batches on the queue's pool, each batch its own short transaction
 * (bulk-live.ts, bulk-history.ts); a list of ids runs a statement per thousand ids, in the
 * caller's transaction when one is given.
 */
export class BulkChanges {
  private readonly q: ReturnType<typeof idsStatements>;
  private readonly live: LiveWalks;
  private readonly history: HistoryWalks;

  constructor(
    private readonly ctx: StoreContext,
    private readonly control: Control,
    batch?: number,
  ) {
    this.q = idsStatements(ctx.sql);
    this.live = new LiveWalks(ctx, batch);
    this.history = new HistoryWalks(ctx, batch);
  }

  /** Finished jobs of one state back to waiting, in batches; returns how many. */
  retryFinished(queue: string, f: HistoryFilter): Promise<number> {
    return this.history.retry(queue, f);
  }

  /** Removes jobs in live selections and finished states, in batches; returns how many. */
  async removeMatching(
    queue: string,
    live: readonly LiveSelection[],
    finished: readonly FinishedState[],
    name: string | null,
    finishedBefore: Date | null,
  ): Promise<number> {
    let total = 0;
    for (const sel of live) total += await this.live.remove(queue, sel, name);
    for (const state of finished) total += await this.history.remove(queue, { state, name, finishedBefore });
    return total;
  }

  /** Cancels live jobs in each selection, in batches (running ones signalled); returns how many. */
  async cancelMatching(queue: string, live: readonly LiveSelection[], name: string | null): Promise<number> {
    let total = 0;
    for (const sel of live) total += await this.live.cancel(queue, sel, name);
    return total;
  }

  /** Removes these jobs (waiting or finished; never running), in `db` when given; returns how many. */
  async removeIds(queue: string, ids: readonly string[], db: SqlExecutor = this.ctx.db): Promise<number> {
    let total = 0;
    for (let i = 0; i < ids.length; i += IDS_BATCH) {
      const [r] = await db.query<{ n: number; one_by_one: string[] }>(this.q.remove, [ids.slice(i, i + IDS_BATCH), queue]);
      total += r.n;
      for (const id of r.one_by_one) if (await this.control.remove(queue, id, db)) total += 1;
    }
    return total;
  }

  /** Cancels these jobs as cancel(id) does each, in `db` when given; returns how many were cancelled or signalled. */
  async cancelIds(queue: string, ids: readonly string[], db: SqlExecutor = this.ctx.db): Promise<number> {
    let total = 0;
    for (let i = 0; i < ids.length; i += IDS_BATCH) {
      const [r] = await db.query<{ n: number }>(this.q.cancel, [ids.slice(i, i + IDS_BATCH), queue, this.ctx.channel]);
      total += r.n;
    }
    return total;
  }

  /** The live walks, for clean.ts's drain and obliterate. */
  get walks(): LiveWalks {
    return this.live;
  }
}
