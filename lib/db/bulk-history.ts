import type { SqlExecutor } from './executor';
import { ID_START } from './keyset';
import type { SchemaSql, StoreContext } from './store-context';

/** Rows one statement of a batched change of finished jobs takes at most (each its own short transaction). */
export const HISTORY_BATCH = 1000;

/** The finished states a walk over the history takes. */
export type FinishedState = 'completed' | 'failed' | 'cancelled';

/**
 * The batch of a walk over finished jobs of queue $1 in state $5 (of name $2 when not NULL, that
 * finished before $6 when not NULL), at most $3, with ids after $4: the history's
 * (queue, state, id) index (migration 0007) of each partition, merged in id order, from $4 on.
 * `finished_at < $6` also lets the planner skip the partitions that finished later.
 */
const PICK = (history: string) => `
        SELECT id FROM ${history}
        WHERE queue = $1 AND state = $5 AND id > $4::bigint AND ($2::text IS NULL OR name = $2)
          AND ($6::timestamptz IS NULL OR finished_at < $6::timestamptz)
        ORDER BY id LIMIT $3`;

/** How many the batch changed, how many the walk read, and the id it ends on (NULL: none read). */
const TAIL = `(SELECT count(*) FROM picked)::int AS found, (SELECT pg_catalog.max(id)::text FROM picked) AS last`;

/** The batched changes of finished jobs: retryJobs, removeJobs over history. */
export function historyStatements({ jobs, history }: SchemaSql) {
  return {
    /**
     * The batch's ids are read once (an InitPlan, ARRAY()), then deleted through each
     * partition's id index: as `id IN (subquery)` a history without statistics was planned as a
     * nested loop that read the subquery again per row (see clean.ts).
     */
    remove: `
      WITH picked AS (${PICK(history)}),
      gone AS (DELETE FROM ${history} WHERE queue = $1 AND state = $5 AND id = ANY(ARRAY(SELECT id FROM picked)) RETURNING 1)
      SELECT (SELECT count(*) FROM gone)::int AS n, ${TAIL}`,

    /**
     * Back to waiting under their own ids, with fresh attempts and their errors kept (a
     * completed job's result is dropped: it will have a new one), as queue.retry(id); one
     * wake-up per batch. $7 channel
     */
    retry: `
      WITH picked AS (${PICK(history)}),
      h AS (DELETE FROM ${history} WHERE queue = $1 AND state = $5 AND id = ANY(ARRAY(SELECT id FROM picked)) RETURNING *),
      back AS (
        INSERT INTO ${jobs} (id, queue, name, payload, priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors,
                             created_at, progress, trace, logs, group_key)
        OVERRIDING SYSTEM VALUE
        SELECT id, queue, name, payload, priority, now(), 0, max_attempts, backoff, timeout_ms, errors, created_at, progress, trace, logs, group_key
        FROM h RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($7, $1 || '|0') WHERE EXISTS (SELECT 1 FROM back))
      SELECT (SELECT count(*) FROM back)::int AS n, ${TAIL}, (SELECT count(*) FROM wake)::int AS woken`,
  };
}

/** A filter over finished jobs: a state, a job name (null: any), finished before (null: any time). */
export interface HistoryFilter {
  readonly state: FinishedState;
  readonly name: string | null;
  readonly finishedBefore: Date | null;
}

/**
 * Walks finished jobs of one queue a batch at a time by id, each batch its own short statement
 * on the queue's pool: a crash in the middle leaves whole batches done (a batch's delete and
 * insert commit together), which a rerun finishes.
 */
export class HistoryWalks {
  private readonly q: ReturnType<typeof historyStatements>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly batch = HISTORY_BATCH,
  ) {
    this.q = historyStatements(ctx.sql);
  }

  /** Removes the finished jobs the filter matches; returns how many. */
  remove(queue: string, f: HistoryFilter, db?: SqlExecutor): Promise<number> {
    return this.walk(this.q.remove, queue, f, [], db);
  }

  /** Runs the finished jobs the filter matches again; returns how many. */
  retry(queue: string, f: HistoryFilter, db?: SqlExecutor): Promise<number> {
    return this.walk(this.q.retry, queue, f, [this.ctx.channel], db);
  }

  private async walk(sql: string, queue: string, f: HistoryFilter, extra: unknown[], db = this.ctx.db): Promise<number> {
    let after = ID_START;
    let total = 0;
    for (;;) {
      const params = [queue, f.name, this.batch, after, f.state, f.finishedBefore, ...extra];
      const [r] = await db.query<{ n: number; found: number; last: string | null }>(sql, params);
      total += r.n;
      if (r.found < this.batch || r.last === null) return total;
      after = r.last;
    }
  }
}
