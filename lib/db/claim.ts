import type { JobAttemptError } from '../core/job';
import type { PgQueryable } from '../core/pg-types';
import type { JobRow } from './job-row';
import { arrayRows } from './executor';
import type { SchemaSql, StoreContext } from './store-context';

/**
 * A row as the claim returns it: times as epoch milliseconds, cheaper to decode than timestamps;
 * no queue (the claim's own); `errors` null while there are none.
 */
export interface ClaimedRow extends Pick<
  JobRow,
  'id' | 'name' | 'payload' | 'priority' | 'attempt' | 'max_attempts' | 'backoff' | 'timeout_ms' | 'progress' | 'unique_key'
> {
  errors: JobAttemptError[] | null;
  /** The enqueue's W3C trace context (migration 0009), or null. */
  trace: { traceparent?: unknown; tracestate?: unknown } | null;
  /** Its cancel was asked while an earlier attempt ran: finish it as cancelled, do not run it (null: not asked). */
  cancel_requested: boolean | null;
  run_at_ms: number;
  /** Null when it equals run_at_ms (a job added to run at once): the claim sends it only when it differs. */
  created_at_ms: number | null;
  started_at_ms: number;
  /** The job's group (migration 17), null without one: every claim returns it, so a handler sees `job.group`. */
  group_key: string | null;
}

/** The claim, its two windowed forms, and the wake-up timer's read, for one schema. */
export function claimStatements({ s, jobs, ack }: SchemaSql) {
  return {
    /**
     * The claim. The inner SELECT walks jobs_claim_idx in its own order (priority, run_at, id)
     * for one queue, skips rows other workers hold, and stops at the number of free slots; the
     * UPDATE marks them active under a lease. It autocommits at once: the job then runs outside
     * any transaction, so a long job never holds a lock, a connection or the xmin horizon.
     * `id = ANY(ARRAY(subquery))` rather than a join: as a prepared statement its generic plan
     * guessed LIMIT $2 at 5,000 rows and hash-joined a sequential scan of the whole table
     * (14 ms per claim at 50,000 jobs, measured); an array of ids always takes the primary key.
     * `least()` keeps a hand-written attempt of 2^31-1 from failing every claim of its queue.
     * A paused queue claims nothing: the uncorrelated NOT EXISTS is a one-time filter, one
     * primary-key probe per claim. A job whose cancel was asked while it ran, and which came
     * back to waiting since (a retry, a hand-back, a rescue), is claimed only to be finished as
     * cancelled (`cancel_requested`), never run.
     * The worker decodes every column of every row it claims, and a NULL costs it nothing: so the
     * queue (the worker's own, $1) is not returned, and an empty error list and a cancel not
     * asked come back NULL (a first attempt's usual row: 9 values to decode instead of 12).
     * group_key is returned as it is: NULL in a queue whose jobs have no group (nothing to
     * decode), the job's group otherwise, so a handler of any queue sees `job.group`.
     * created_at comes back only when it differs from run_at: a job added to run at once has both
     * from its insert's now(), and each epoch value costs about 0.25 us per row to compute, send
     * and parse (bench/outcome-cost.mjs: the claim's three took 0.74 us of its 9.0 per job).
     * $1 queue $2 limit $3 worker id $4 lease ms
     */
    claim: `
      UPDATE ${jobs} j
      SET state = 'active', attempt = least(j.attempt, 2147483646) + 1, locked_by = $3,
          locked_until = now() + $4::float8 * interval '1 millisecond', started_at = now()
      WHERE j.id = ANY(ARRAY(
        SELECT id FROM ${jobs}
        WHERE state = 'waiting' AND queue = $1 AND run_at <= now()
          AND NOT EXISTS (SELECT 1 FROM ${s}.queues WHERE name = $1 AND paused)
        ORDER BY priority, run_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED)) ${ack}
      RETURNING j.id, j.name, j.payload, j.priority, j.attempt, j.max_attempts, j.backoff, j.timeout_ms,
                nullif(j.errors, '[]') AS errors, CASE WHEN j.cancel_requested_at IS NOT NULL THEN true END AS cancel_requested,
                ${epochMs('j.run_at')} AS run_at_ms, CASE WHEN j.created_at <> j.run_at THEN ${epochMs('j.created_at')} END AS created_at_ms,
                ${epochMs('j.started_at')} AS started_at_ms, j.progress, j.trace, j.unique_key, j.group_key`,

    /**
     * The claim within a window, for while vacuum is held back (issue 13; the worker's
     * ClaimWindow says when). Every job leaves a dead entry at the head of jobs_claim_idx (the
     * claim's UPDATE moves it out of the partial index, the outcome deletes it). Normally index
     * scans mark those entries dead and vacuum removes them; while any snapshot older than them
     * is open (an idle-in-transaction session, a long REPEATABLE READ report) neither can, so
     * every claim walks, and visits in the heap, every job finished since that snapshot: 6,086
     * shared buffers and 13-14 ms per claim after 150,000 jobs (bench/held-xmin.mjs). This is the
     * claim statement itself with one more pair of index conditions: the row comparison starts
     * the index scan at ($5 priority, run_at = now() - $6 ms), past that dead prefix, and the
     * run_at bound skips the older entries of any later priority inside the index, without a
     * heap visit: 8 buffers for the same claim. A live job outside the window (run_at older, or
     * priority lower than $5) is what `claimOutside` is for.
     * $1 to $4 as the claim, $5 lowest priority $6 window in ms back from now()
     */
    get claimSince(): string {
      return withClaimWindow(this.claim, 'inside');
    },

    /**
     * The worker's periodic catch-up while its window is on: the claim of the jobs claimSince
     * leaves out, and only those. It still walks the dead prefix (a heap filter, not an index
     * condition), but the jobs inside the window are not its to take, so none of them waits for
     * that walk: in a 4-minute held-horizon phase (test:chaos --long) the catch-up, as a full
     * claim, had late jobs waiting for it. $1 to $6 as claimSince
     */
    get claimOutside(): string {
      return withClaimWindow(this.claim, 'outside');
    },

    /**
     * How long until the queue's next delayed job is due (NULL: none), for the worker's wake-up
     * timer. min(run_at) over the queue would read every waiting row of it: jobs_claim_idx is
     * ordered by priority first. Instead a loose index scan visits each priority in use (one
     * probe each) and takes that priority's earliest future run_at (one more probe): a few
     * probes whatever the backlog. Future jobs only: a due one is the claim's business, and a
     * paused queue's due jobs must not re-arm the timer at once. $1 queue
     */
    nextDue: `
      WITH RECURSIVE p AS (
        (SELECT priority FROM ${jobs} WHERE queue = $1 AND state = 'waiting' ORDER BY priority LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM ${jobs} j WHERE j.queue = $1 AND j.state = 'waiting' AND j.priority > p.priority
                ORDER BY j.priority LIMIT 1)
        FROM p WHERE p.priority IS NOT NULL
      )
      SELECT extract(epoch FROM pg_catalog.min(n.run_at) - now())::float8 * 1000::float8 AS due_in_ms
      FROM p CROSS JOIN LATERAL (
        SELECT j.run_at FROM ${jobs} j
        WHERE j.queue = $1 AND j.state = 'waiting' AND j.priority = p.priority AND j.run_at > now()
        ORDER BY j.run_at LIMIT 1) n`,
  };
}

export type ClaimStatements = ReturnType<typeof claimStatements>;

/**
 * A timestamptz as epoch milliseconds (float8), for the columns the worker decodes per claimed
 * row. `date_part` computes it in float8; `extract` (numeric since PostgreSQL 14) in numeric,
 * then cast: 1,000,000 values summed took 229-242 ms against 84 ms (PostgreSQL 15, a 30 ms scan),
 * about 0.15 us more per value, three values per claimed job. Both give the same double: the
 * microseconds since the epoch, an exact integer, divided by 10^6 and rounded once.
 */
export function epochMs(ts: string): string {
  return `pg_catalog.date_part('epoch', ${ts}) * 1000::float8`;
}

/** Where the claim's due-time condition is: the window's conditions join it (the index's order). */
const CLAIM_DUE = 'AND run_at <= now()';

/**
 * The claim with the window's conditions added (`claimSince`), or their complement
 * (`claimOutside`): built from the claim itself, so a condition added to what is claimable
 * applies to all three. Throws if the claim no longer has the condition it anchors on (the store
 * builds both once, at boot; a unit test builds them too).
 */
export function withClaimWindow(claim: string, side: 'inside' | 'outside'): string {
  const parts = claim.split(CLAIM_DUE);
  if (parts.length !== 2) throw new Error(`claimSince: the claim must contain '${CLAIM_DUE}' exactly once`);
  const from = `now() - $6::bigint::float8 * interval '1 millisecond'`;
  const cond =
    side === 'inside'
      ? `(priority, run_at) >= ($5::int, ${from}) AND run_at >= ${from}`
      : `(priority < $5::int OR run_at < ${from})`;
  return parts.join(`${CLAIM_DUE} AND ${cond}`);
}

/** Claims of one queue on the queue's own pool, each statement prepared once per connection. */
export class Claims {
  readonly q: ClaimStatements;
  private readonly claimSinceSql: string;
  private readonly claimOutsideSql: string;

  constructor(private readonly ctx: StoreContext) {
    this.q = claimStatements(ctx.sql);
    // Built once, so a claim they cannot extend fails at boot.
    this.claimSinceSql = this.q.claimSince;
    this.claimOutsideSql = this.q.claimOutside;
  }

  claim(queue: string, limit: number, workerId: string, leaseMs: number): Promise<ClaimedRow[]> {
    return this.run(this.q.claim, [queue, limit, workerId, leaseMs]);
  }

  /**
   * The claim restricted to jobs of priority >= `fromPriority` due within the last `windowMs`
   * (database clock): what stays fast while vacuum is held back (`claimSince` above);
   * `outside`: the claim of every other due job (`claimOutside`).
   */
  claimSince(
    queue: string,
    limit: number,
    workerId: string,
    leaseMs: number,
    fromPriority: number,
    windowMs: number,
    side: 'inside' | 'outside' = 'inside',
  ): Promise<ClaimedRow[]> {
    const sql = side === 'inside' ? this.claimSinceSql : this.claimOutsideSql;
    return this.run(sql, [queue, limit, workerId, leaseMs, fromPriority, Math.ceil(windowMs)]);
  }

  private run(sql: string, params: unknown[]): Promise<ClaimedRow[]> {
    return runClaim(this.ctx.pool, sql, params, this.ctx.name(sql));
  }

  /** Milliseconds until the queue's next delayed job is due (database clock); null when none is. */
  async nextDueInMs(queue: string): Promise<number | null> {
    const [r] = await this.ctx.db.query<{ due_in_ms: number | null }>(this.q.nextDue, [queue]);
    return r?.due_in_ms ?? null;
  }
}

/**
 * Runs the claim (or a windowed form of it) on `target`, its rows decoded by position
 * (claimedRows): the one reader of the claim's rows, for the pool's claims here and the limited
 * claim's inside its lock (claim-limited.ts).
 */
export async function runClaim(target: PgQueryable, sql: string, params: unknown[], name?: string): Promise<ClaimedRow[]> {
  const { rows, columns } = await arrayRows(target, sql, params, name);
  return claimedRows(rows, columns);
}

/** The claim's columns, in its RETURNING order: what claimedRows reads by position. */
export const CLAIMED_COLUMNS = [
  'id',
  'name',
  'payload',
  'priority',
  'attempt',
  'max_attempts',
  'backoff',
  'timeout_ms',
  'errors',
  'cancel_requested',
  'run_at_ms',
  'created_at_ms',
  'started_at_ms',
  'progress',
  'trace',
  'unique_key',
  'group_key',
] as const satisfies readonly (keyof ClaimedRow)[];

/**
 * The claim's rows, each built as one object literal from the values by position: about a
 * quarter of the decoding pg does for an object row (565 against 416 ns per claimed row, the 17
 * columns of a first attempt, pg 8.23). Checks the columns' names against CLAIMED_COLUMNS
 * whenever rows come back, so a RETURNING list out of step with this reader fails at once.
 */
export function claimedRows(rows: readonly unknown[][], columns: readonly { readonly name: string }[]): ClaimedRow[] {
  if (rows.length === 0) return [];
  if (columns.length !== CLAIMED_COLUMNS.length || columns.some((c, i) => c.name !== CLAIMED_COLUMNS[i])) {
    throw new Error(
      `claim: the statement returned columns (${columns.map((c) => c.name).join(', ')}), expected (${CLAIMED_COLUMNS.join(', ')})`,
    );
  }
  const out: ClaimedRow[] = new Array<ClaimedRow>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    out[i] = {
      id: r[0],
      name: r[1],
      payload: r[2],
      priority: r[3],
      attempt: r[4],
      max_attempts: r[5],
      backoff: r[6],
      timeout_ms: r[7],
      errors: r[8],
      cancel_requested: r[9],
      run_at_ms: r[10],
      created_at_ms: r[11],
      started_at_ms: r[12],
      progress: r[13],
      trace: r[14],
      unique_key: r[15],
      group_key: r[16],
    } as ClaimedRow;
  }
  return out;
}
