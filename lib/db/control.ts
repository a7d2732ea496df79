import type { SqlExecutor } from './executor';
import { publishCte, publishRef } from './events';
import { archiveCancelledSql } from './job-row';
import type { SchemaSql, StoreContext } from './store-context';

/** The operator's writes: cancel, pause and resume, retry of finished jobs, remove. */
export function controlStatements(sql: SchemaSql) {
  const { s, jobs, history } = sql;
  return {
    /**
     * queue.cancel(id): a waiting job goes to history as cancelled at once; a running one is
     * flagged, and NOTIFY '!cancel|id' tells the node running it (its heartbeat reads the flag if
     * the notification is missed). `target` locks the row first and reads its state as it is
     * once locked: FOR UPDATE waits for a claim or an outcome in flight and then sees its result,
     * where the statement's snapshot still has the old state. Both branches test that locked
     * state, not their own snapshot's, and re-find the row they locked (their own lock lets them
     * through), so a job that changed state meanwhile is cancelled in its new state rather than
     * matched by neither branch (which answered "no live job" for a live one). A parent waiting
     * on its children is cancelled like a waiting job; its children are left to run (their
     * trigger then finds no parent to release).
     * $1 id $2 queue $3 channel
     */
    cancel: `
      WITH target AS (
        SELECT id, state FROM ${jobs} WHERE id = $1 AND queue = $2 FOR UPDATE
      ), waiting AS (
        DELETE FROM ${jobs} j USING target t WHERE j.id = t.id AND t.state IN ('waiting', 'waiting-children') RETURNING j.*
      ), archived AS (
        ${archiveCancelledSql(history, 'waiting', 'queue.cancel()')}
      ), running AS (
        UPDATE ${jobs} j SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
        FROM target t WHERE j.id = t.id AND t.state = 'active' RETURNING j.id
      ), wake AS (SELECT pg_catalog.pg_notify($3, '!cancel|' || id::text) FROM running)${publishCte(sql, 'cancelled', 'archived')}
      SELECT (SELECT count(*) FROM archived)::int AS cancelled, (SELECT count(*) FROM running)::int AS cancelling,
             (SELECT count(*) FROM wake)::int AS notified, ${publishRef(sql)} AS published`,

    /**
     * Pause or resume a queue for every node. Pausing tells running workers to hand back the
     * jobs they prefetched; resuming wakes them. $1 queue $2 paused $3 channel
     */
    setPaused: `
      WITH up AS (
        INSERT INTO ${s}.queues (name, paused) VALUES ($1, $2) ON CONFLICT (name)
        DO UPDATE SET paused = EXCLUDED.paused, updated_at = now() RETURNING name
      )
      SELECT pg_catalog.pg_notify($3, CASE WHEN $2 THEN '!pause|' || name ELSE name || '|0' END) FROM up`,

    /**
     * Which of these jobs the database says were asked to cancel: a '!cancel|id' notification is
     * only a hint (any role that can connect may send one), so the worker acts on what this reads.
     * One primary-key probe per id. $1 id[]
     */
    cancelRequested: `SELECT id::text AS id FROM ${jobs} WHERE id = ANY($1::bigint[]) AND cancel_requested_at IS NOT NULL`,

    /** $1 queue */
    isPaused: `SELECT coalesce((SELECT paused FROM ${s}.queues WHERE name = $1), false) AS paused`,

    /**
     * queue.retry(id): failed, cancelled or completed jobs of a queue go back to waiting under
     * their own id, with fresh attempts and their errors kept (a completed job's result is
     * dropped: it will have a new one, as Bull Board's retry of a completed job). retryFailed()
     * and retryJobs() walk the history in batches instead (bulk-history.ts).
     * $1 id[] $2 queue $3 channel
     */
    retryFinished: `
      WITH h AS (
        DELETE FROM ${history} WHERE queue = $2 AND id = ANY($1::bigint[]) AND state IN ('failed', 'cancelled', 'completed')
        RETURNING *
      ), back AS (
        INSERT INTO ${jobs} (id, queue, name, payload, priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at,
                             progress, trace, logs, group_key)
        OVERRIDING SYSTEM VALUE
        SELECT id, queue, name, payload, priority, now(), 0, max_attempts, backoff, timeout_ms, errors, created_at, progress, trace, logs, group_key FROM h
        RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($3, $2 || '|0') WHERE EXISTS (SELECT 1 FROM back))
      SELECT count(*)::int AS n, (SELECT count(*) FROM wake) AS woken FROM back`,

    /**
     * queue.remove(id): a waiting job (or one waiting on its children), or a finished one; never a
     * running one. The transaction-local setting names the removed id for the trigger of
     * migration 0008, which tells the parents of a removed child that it was removed, not
     * completed (it fires at the end of this statement, after the setting is made).
     * $1 id $2 queue
     */
    remove: `
      WITH live AS (DELETE FROM ${jobs} WHERE id = $1 AND queue = $2 AND state IN ('waiting', 'waiting-children') RETURNING id),
           done AS (DELETE FROM ${history} WHERE id = $1 AND queue = $2 RETURNING id)
      SELECT (SELECT count(*) FROM live) + (SELECT count(*) FROM done) AS n,
             pg_catalog.set_config('pgqueue.removing_job', $1::text, true) IS NOT NULL AS marked`,
  };
}

/** The operator's writes on one queue, on the queue's pool or on a caller's transaction. */
export class Control {
  private readonly q: ReturnType<typeof controlStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = controlStatements(ctx.sql);
  }

  /**
   * Cancels a live job: 'cancelled' (it was waiting), 'cancelling' (it runs: its node is told),
   * or null (no live job of that queue has this id: unknown, or already finished).
   */
  async cancel(queue: string, id: string, db: SqlExecutor = this.ctx.db): Promise<'cancelled' | 'cancelling' | null> {
    // One statement that locks the row first: a claim or outcome committing meanwhile cannot
    // make it miss the job (see the query), so there is nothing to run again.
    const [r] = await db.query<{ cancelled: number; cancelling: number }>(this.q.cancel, [id, queue, this.ctx.channel]);
    if (r.cancelled > 0) return 'cancelled';
    if (r.cancelling > 0) return 'cancelling';
    return null;
  }

  /** Finished jobs (failed, cancelled or completed) with these ids back to waiting. Returns how many. */
  async retryFinished(queue: string, ids: readonly string[], db: SqlExecutor = this.ctx.db): Promise<number> {
    let total = 0;
    for (let i = 0; i < ids.length; i += 1000) {
      const [r] = await db.query<{ n: number }>(this.q.retryFinished, [ids.slice(i, i + 1000), queue, this.ctx.channel]);
      total += r.n;
    }
    return total;
  }

  /** Deletes a waiting or finished job; false when there was none (or it is running). */
  async remove(queue: string, id: string, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    const [r] = await db.query<{ n: string }>(this.q.remove, [id, queue]);
    return Number(r.n) > 0;
  }

  async setPaused(queue: string, paused: boolean): Promise<void> {
    await this.ctx.db.query(this.q.setPaused, [queue, paused, this.ctx.channel]);
  }

  /** The ids among `ids` (decimal strings) whose cancellation was asked in the database. */
  async cancelRequested(ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.ctx.db.query<{ id: string }>(this.q.cancelRequested, [ids]);
    return rows.map((r) => r.id);
  }

  async isPaused(queue: string): Promise<boolean> {
    const [r] = await this.ctx.db.query<{ paused: boolean }>(this.q.isPaused, [queue]);
    return r.paused;
  }
}
