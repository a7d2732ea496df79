import { publishCte, publishRef } from './events';
import { archiveCancelledSql } from './job-row';
import { afterClaimKey, CLAIM_KEY_START, claimKeyOf, claimKeyParams, lastClaimKey, type ClaimKey } from './keyset';
import type { SchemaSql, StoreContext } from './store-context';

/** Rows one statement of a batched change of live jobs takes at most (each its own short transaction). */
export const LIVE_BATCH = 1000;

/**
 * Which live jobs a walk takes: `waiting` due now, `delayed` due later, `queued` both (state
 * 'waiting'), `waiting-children`, or `active` (running).
 */
export type LiveSelection = 'waiting' | 'delayed' | 'queued' | 'waiting-children' | 'active';

const CLAIM_ORDER: Readonly<Record<LiveSelection, boolean>> = {
  waiting: true,
  delayed: true,
  queued: true,
  'waiting-children': false,
  active: false,
};

/** The parameters after $1 queue $2 name $3 batch: the key ($4..$6 in claim order, $4 by id), then the channel. */
const channelParam = (sel: LiveSelection): string => (CLAIM_ORDER[sel] ? '$7' : '$5');

/**
 * The batch of a walk over live jobs of queue $1 (of name $2 when not NULL), at most $3, after the
 * key. waiting, delayed and queued walk jobs_claim_idx (queue, priority, run_at, id) in its own
 * order, from the key as the scan's start; waiting-children walks jobs_waiting_children_idx
 * (queue, id) by id. `FOR UPDATE SKIP LOCKED` passes over a row a claim holds (the job is being
 * taken by a worker: it is no longer waiting) and rechecks `state` on a row that changed after the
 * snapshot, so a job claimed meanwhile is never taken for a waiting one. Running jobs (active:
 * a few per worker, read through jobs_active_idx) are not locked here: the UPDATE that flags them
 * waits its turn behind a heartbeat or an outcome, then rechecks the state.
 */
function pickSql(jobs: string, sel: LiveSelection, extra: string): string {
  const state = sel === 'waiting-children' || sel === 'active' ? sel : 'waiting';
  const due = sel === 'waiting' ? 'AND run_at <= now()' : sel === 'delayed' ? 'AND run_at > now()' : '';
  const named = `AND ($2::text IS NULL OR name = $2)`;
  if (CLAIM_ORDER[sel]) {
    return `SELECT id, priority, run_at FROM ${jobs}
        WHERE queue = $1 AND state = 'waiting' ${due} ${named} ${extra} AND ${afterClaimKey(4)}
        ORDER BY priority, run_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`;
  }
  return `SELECT id, priority, run_at FROM ${jobs}
        WHERE queue = $1 AND state = '${state}' ${named} ${extra} AND id > $4::bigint
        ORDER BY id LIMIT $3${sel === 'active' ? '' : ' FOR UPDATE SKIP LOCKED'}`;
}

/** The key of the batch's last row, as `keyset.ts` reads it. */
function lastKey(sel: LiveSelection): string {
  return CLAIM_ORDER[sel]
    ? lastClaimKey('picked')
    : `(SELECT pg_catalog.json_build_array(0, '', pg_catalog.max(id)::text) FROM picked HAVING count(*) > 0)`;
}

const stateOf = (sel: LiveSelection): string => (sel === 'waiting-children' || sel === 'active' ? sel : 'waiting');

/**
 * Deletes a batch of jobs no other job waits on; `found` and `last` say how many the walk read and
 * where it ends. A job another waits on (a flow's child, a dependsOn target) is left to `removeOne`.
 */
function removeSql(jobs: string, sel: LiveSelection): string {
  return `
      WITH picked AS (${pickSql(jobs, sel, 'AND NOT has_dependents')}),
      gone AS (DELETE FROM ${jobs} j USING picked p WHERE j.id = p.id AND j.state = '${stateOf(sel)}' RETURNING j.id)
      SELECT (SELECT count(*) FROM gone)::int AS n, (SELECT count(*) FROM picked)::int AS found,
             ${lastKey(sel)} AS last`;
}

/**
 * One job another job waits on, per statement: the trigger of migration 0008 tells its parents
 * it was removed (not completed) only for the id named in the transaction-local setting, as
 * queue.remove() does. $3 is 1.
 */
function removeOneSql(jobs: string, sel: LiveSelection): string {
  return `
      WITH picked AS (${pickSql(jobs, sel, 'AND has_dependents')}),
      gone AS (DELETE FROM ${jobs} j USING picked p WHERE j.id = p.id AND j.state = '${stateOf(sel)}' RETURNING j.id)
      SELECT (SELECT count(*) FROM gone)::int AS n, (SELECT count(*) FROM picked)::int AS found,
             ${lastKey(sel)} AS last,
             pg_catalog.set_config('pgqueue.removing_job', coalesce((SELECT id::text FROM gone), ''), true) IS NOT NULL AS marked`;
}

/**
 * Cancels a batch of waiting jobs as queue.cancel(id) does one: to history as cancelled, the
 * cancel recorded as its last error. The trigger of migration 0008 reads that history row (same
 * statement) and tells a cancelled child's parents.
 */
function cancelWaitingSql(sql: SchemaSql, sel: LiveSelection): string {
  const { jobs, history } = sql;
  return `
      WITH picked AS (${pickSql(jobs, sel, '')}),
      gone AS (DELETE FROM ${jobs} j USING picked p WHERE j.id = p.id AND j.state = '${stateOf(sel)}' RETURNING j.*),
      archived AS (
        ${archiveCancelledSql(history, 'gone', 'queue.cancelJobs()')}
      )${publishCte(sql, 'cancelled', 'archived')}
      SELECT (SELECT count(*) FROM archived)::int AS n, (SELECT count(*) FROM picked)::int AS found,
             ${lastKey(sel)} AS last, ${publishRef(sql)} AS published`;
}

/**
 * Cancels a batch of running jobs as queue.cancel(id) does one: flagged, and NOTIFY
 * '!cancel|id' tells the node running each (its heartbeat reads the flag if that is missed).
 * The handler's job.signal fires; the job ends cancelled unless it completes anyway.
 */
function cancelActiveSql(jobs: string): string {
  return `
      WITH picked AS (${pickSql(jobs, 'active', '')}),
      up AS (
        UPDATE ${jobs} j SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
        FROM picked p WHERE j.id = p.id AND j.state = 'active' RETURNING j.id
      ), wake AS (SELECT pg_catalog.pg_notify(${channelParam('active')}, '!cancel|' || id::text) FROM up)
      SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM picked)::int AS found,
             ${lastKey('active')} AS last, (SELECT count(*) FROM wake)::int AS notified`;
}

const SELECTIONS: readonly LiveSelection[] = ['waiting', 'delayed', 'queued', 'waiting-children', 'active'];
const each = (build: (sel: LiveSelection) => string) =>
  Object.fromEntries(SELECTIONS.map((sel) => [sel, build(sel)])) as Record<LiveSelection, string>;

/** The batched removals and cancels of live jobs, one statement per selection. */
export function liveStatements(sql: SchemaSql) {
  return {
    remove: each((sel) => removeSql(sql.jobs, sel)),
    removeOne: each((sel) => removeOneSql(sql.jobs, sel)),
    cancelWaiting: each((sel) => cancelWaitingSql(sql, sel)),
    cancelActive: cancelActiveSql(sql.jobs),
  };
}

type BatchRow = { n: number; found: number; last: [number, string, string] | null };

/**
 * Walks live jobs of one queue a batch at a time, each batch its own short statement (autocommit
 * on the queue's pool): no statement locks more than `batch` rows, and a crash in the middle
 * leaves whole batches done, which a rerun finishes.
 */
export class LiveWalks {
  private readonly q: ReturnType<typeof liveStatements>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly batch = LIVE_BATCH,
  ) {
    this.q = liveStatements(ctx.sql);
  }

  /**
   * Removes the selected jobs (never a running one unless `sel` is 'active', which only
   * obliterate({ force }) asks): a batch at a time those no other job waits on, then one per
   * statement those one does. Returns how many.
   */
  async remove(queue: string, sel: LiveSelection, name: string | null): Promise<number> {
    return (
      (await this.walk(this.q.remove[sel], queue, sel, name, this.batch)) +
      (await this.walk(this.q.removeOne[sel], queue, sel, name, 1))
    );
  }

  /** Cancels the selected jobs: waiting ones end cancelled, running ones are signalled (as cancel(id)). Returns how many. */
  async cancel(queue: string, sel: LiveSelection, name: string | null): Promise<number> {
    const sql = sel === 'active' ? this.q.cancelActive : this.q.cancelWaiting[sel];
    return this.walk(sql, queue, sel, name, this.batch, sel === 'active');
  }

  private async walk(
    sql: string,
    queue: string,
    sel: LiveSelection,
    name: string | null,
    batch: number,
    channel = false,
  ): Promise<number> {
    let key: ClaimKey = CLAIM_KEY_START;
    let total = 0;
    for (;;) {
      const at = CLAIM_ORDER[sel] ? claimKeyParams(key) : [key.id];
      const params = [queue, name, batch, ...at, ...(channel ? [this.ctx.channel] : [])];
      const [r] = await this.ctx.db.query<BatchRow>(sql, params);
      total += r.n;
      const next = claimKeyOf(r.last);
      // A short batch: the walk reached the end of the index range (rows a claim held were passed over).
      if (r.found < batch || !next) return total;
      key = next;
    }
  }
}
