import type { SqlExecutor } from './executor';
import { afterClaimKey, CLAIM_KEY_START, claimKeyOf, claimKeyParams, lastClaimKey, type ClaimKey } from './keyset';
import type { SchemaSql, StoreContext } from './store-context';

/** How many delayed jobs one statement of promoteJobs makes due: each batch is its own short statement. */
export const PROMOTE_BATCH = 1000;

/**
 * The operator's changes to one waiting job: promote, priority, delay, payload. Each statement
 * is an UPDATE guarded by `state = 'waiting'`: a worker's claim takes the same row lock, and
 * PostgreSQL re-checks the guard on the row as committed once the lock is free (EvalPlanQual), so
 * a job claimed meanwhile is not changed (0 rows) rather than changed under its running handler.
 * A job waiting on its children ('waiting-children') is not changed either.
 */
export function changeStatements({ jobs }: SchemaSql) {
  return {
    /**
     * queue.promote(id): a delayed job becomes due now, and the queue's workers are woken as by
     * an enqueue. $1 id $2 queue $3 channel
     */
    promoteIfDelayed: `
      WITH up AS (
        UPDATE ${jobs} SET run_at = now() WHERE id = $1 AND queue = $2 AND state = 'waiting' AND run_at > now() RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($3, $2 || '|0') WHERE EXISTS (SELECT 1 FROM up))
      SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM wake)::int AS woken`,

    /**
     * queue.promoteJobs(): up to $4 delayed jobs of a queue (of one name, if given) due now, one
     * wake-up. The batch is found on jobs_claim_idx (queue, priority, run_at, id) WHERE state =
     * 'waiting' with run_at > now() an index condition; SKIP LOCKED passes over a row a claim or
     * another promote holds, so a batch never waits behind one, and the caller loops until a
     * batch comes back short. Each batch starts after the last (priority, run_at, id) of the one
     * before (keyset.ts): a promoted job moves to run_at = now(), behind that key, and the due
     * jobs in front are not read again by every batch. $1 queue $2 name or NULL $3 channel
     * $4 batch $5..$7 key
     */
    promoteDelayed: `
      WITH batch AS (
        SELECT id, priority, run_at FROM ${jobs}
        WHERE queue = $1 AND state = 'waiting' AND run_at > now() AND ($2::text IS NULL OR name = $2) AND ${afterClaimKey(5)}
        ORDER BY priority, run_at, id LIMIT $4 FOR UPDATE SKIP LOCKED
      ), up AS (
        UPDATE ${jobs} j SET run_at = now() FROM batch b WHERE j.id = b.id AND j.state = 'waiting' RETURNING j.id
      ), wake AS (SELECT pg_catalog.pg_notify($3, $1 || '|0') WHERE EXISTS (SELECT 1 FROM up))
      SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM batch)::int AS found, (SELECT count(*) FROM wake)::int AS woken,
             ${lastClaimKey('batch')} AS last`,

    /**
     * queue.changePriority(id, p). A waiting job's place in the claim order moves with it; workers
     * are woken (a job may now come before what they wait for). $1 id $2 queue $3 priority $4 channel
     */
    changePriorityIfWaiting: `
      WITH up AS (
        UPDATE ${jobs} SET priority = $3::int WHERE id = $1 AND queue = $2 AND state = 'waiting' RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($4, $2 || '|0') WHERE EXISTS (SELECT 1 FROM up))
      SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM wake)::int AS woken`,

    /**
     * queue.changeDelay(id, ms): a waiting job (due or delayed) becomes due `ms` from now on the
     * database clock, as add's delayMs. A wake-up too, so a worker re-arms its timer for the next
     * due job. $1 id $2 queue $3 delay ms $4 channel
     */
    changeDelayIfWaiting: `
      WITH up AS (
        UPDATE ${jobs} SET run_at = now() + $3::float8 * interval '1 millisecond'
        WHERE id = $1 AND queue = $2 AND state = 'waiting' RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($4, $2 || '|0') WHERE EXISTS (SELECT 1 FROM up))
      SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM wake)::int AS woken`,

    /** queue.updatePayload(id, payload): a waiting job's payload replaced. $1 id $2 queue $3 payload (JSON text) */
    updatePayloadIfWaiting: `
      UPDATE ${jobs} SET payload = $3::jsonb WHERE id = $1 AND queue = $2 AND state = 'waiting' RETURNING id`,
  };
}

/** The operator's changes to waiting jobs of one queue (change.ts), on the queue's pool or a caller's transaction. */
export class Changes {
  private readonly q: ReturnType<typeof changeStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = changeStatements(ctx.sql);
  }

  /** True when the job was delayed (waiting, due later) and is now due. */
  async promote(queue: string, id: string, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    const [r] = await db.query<{ n: number }>(this.q.promoteIfDelayed, [id, queue, this.ctx.channel]);
    return r.n > 0;
  }

  /** Every delayed job of a queue (of one name) due now, a batch per statement; returns how many. */
  async promoteMany(queue: string, name: string | null, batch = PROMOTE_BATCH): Promise<number> {
    let total = 0;
    let key: ClaimKey = CLAIM_KEY_START;
    for (;;) {
      const [r] = await this.ctx.db.query<{ n: number; found: number; last: [number, string, string] | null }>(
        this.q.promoteDelayed,
        [queue, name, this.ctx.channel, batch, ...claimKeyParams(key)],
      );
      total += r.n;
      const next = claimKeyOf(r.last);
      if (r.found < batch || !next) return total;
      key = next;
    }
  }

  async changePriority(queue: string, id: string, priority: number, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    const [r] = await db.query<{ n: number }>(this.q.changePriorityIfWaiting, [id, queue, priority, this.ctx.channel]);
    return r.n > 0;
  }

  async changeDelay(queue: string, id: string, delayMs: number, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    const [r] = await db.query<{ n: number }>(this.q.changeDelayIfWaiting, [id, queue, delayMs, this.ctx.channel]);
    return r.n > 0;
  }

  async updatePayload(queue: string, id: string, payloadJson: string, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    const rows = await db.query<{ id: string }>(this.q.updatePayloadIfWaiting, [id, queue, payloadJson]);
    return rows.length > 0;
  }
}
