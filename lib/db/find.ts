import type { ListKey, ListState } from '../core/dashboard-reads';
import type { Job, JobState } from '../core/job';
import { buildJobList, FILTER_SCAN_LIMIT } from './dashboard-queries';
import type { SqlExecutor } from './executor';
import { LIVE_COLS, rowToJob, type JobRow } from './job-row';
import { liveCountsSql, waitingChildrenSql } from './reads';
import type { StoreContext } from './store-context';

/** One page of queue.getJobs: the jobs, and where the next page starts (null: none). */
export interface FoundPage {
  jobs: Job[];
  /** The state the next page continues in, and its key there; null when every state is done. */
  next: { state: ListState; key: ListKey | null } | null;
}

type ListRow = JobRow & { run_at_key: string | null; scanned: number; scan_end: ListKey | null };

/**
 * The most statements one getJobs page filtered by name runs: each may scan FILTER_SCAN_LIMIT
 * index entries of a state and find none. Past this many it answers what it found with a cursor
 * to go on from, so one call never walks a whole history looking for a rare name. Unfiltered, a
 * statement either fills the page or finishes its state: at most one per state.
 */
const MAX_STATEMENTS_PER_PAGE = 4;

/** The operator's reads of one queue: pages of jobs in given states, counts per state, a job by its unique key. */
export function findStatements(jobs: string, history: string, s: string) {
  return {
    /**
     * queue.getJobCounts(): every state of one queue, each only when asked ($2 .. $8: waiting,
     * delayed, active, waiting-children, completed, failed, cancelled). The live figures are
     * index-only scans of the claim, active and waiting-children partial indexes (liveCountsSql);
     * each history state is a count on job_history_queue_state_idx (queue, state, id), whose
     * state prefix keeps it to that state's entries of this queue. A history count is as long as
     * the history kept (retention): each is a scalar subquery under CASE, so a state not asked for
     * is never read (an uncorrelated subquery runs as an InitPlan, only when first needed).
     * `delayed` here keeps the parked jobs (job.sleep, job.waitFor) that getCounts() shows apart:
     * it is the count of getJobs(['delayed']), as in BullMQ, which has no parked state.
     * $1 queue
     */
    jobCounts: `
      WITH live AS (${liveCountsSql(jobs, '$1', s)}), parents AS (${waitingChildrenSql(jobs, '$1')})
      SELECT coalesce((SELECT waiting FROM live), 0)::int AS waiting,
             coalesce((SELECT delayed + sleeping + waiting_signal FROM live), 0)::int AS delayed,
             coalesce((SELECT active FROM live), 0)::int AS active,
             coalesce((SELECT waiting_children FROM parents), 0)::int AS waiting_children,
             CASE WHEN $2::boolean THEN (SELECT count(*) FROM ${history} WHERE queue = $1 AND state = 'completed') END::int AS completed,
             CASE WHEN $3::boolean THEN (SELECT count(*) FROM ${history} WHERE queue = $1 AND state = 'failed') END::int AS failed,
             CASE WHEN $4::boolean THEN (SELECT count(*) FROM ${history} WHERE queue = $1 AND state = 'cancelled') END::int AS cancelled`,

    /**
     * queue.getJobByKey(key): the live job holding a unique key, on jobs_unique_key_idx
     * (queue, unique_key): at most one row. Live jobs only, on purpose: history keeps a finished
     * job's key (migration 13) but not its hold on it, and has no index on it (one more entry per
     * finished job, for a read that is about who holds the key now). $1 queue $2 key
     */
    byKey: `SELECT ${LIVE_COLS} FROM ${jobs} WHERE queue = $1 AND unique_key = $2`,
  };
}

/** The operator's reads of one queue (find.ts): getJobs, getJobCounts, getJobByKey. */
export class Finder {
  private readonly q: ReturnType<typeof findStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = findStatements(ctx.sql.jobs, ctx.sql.history, ctx.sql.s);
  }

  /**
   * Up to `limit` jobs of `queue` in `states`, listed state after state, from `from` (the
   * state and key a previous page ended at; null: the first state's start). Each state is
   * paged by keyset on its own index (dashboard-queries.ts, buildJobList): waiting and delayed
   * jobs in claim order, the others newest first; never OFFSET, so a page deep in a million
   * finished jobs costs what the first one does.
   */
  async page(
    queue: string,
    states: readonly ListState[],
    name: string | undefined,
    limit: number,
    from: { state: ListState; key: ListKey | null } | null,
    db: SqlExecutor = this.ctx.db,
  ): Promise<FoundPage> {
    const jobs: Job[] = [];
    let i = from ? states.indexOf(from.state) : 0;
    let key = from?.key ?? null;
    for (let statements = 0; i < states.length; statements++) {
      if (jobs.length >= limit || (name !== undefined && statements >= MAX_STATEMENTS_PER_PAGE))
        return { jobs, next: { state: states[i], key } };
      const state = states[i];
      const want = limit - jobs.length;
      const filters = name === undefined ? {} : { name };
      const { text, values } = buildJobList(this.ctx.schema, state, { queue, cursor: key, filters, limit: want });
      const rows = await db.query<ListRow>(text, values);
      const { scanned, scan_end } = rows[0];
      const found = rows.filter((r) => r.id !== null);
      const taken = found.slice(0, want);
      for (const r of taken) jobs.push(rowToJob(r));
      const claimOrder = state === 'waiting' || state === 'delayed';
      const last = taken[taken.length - 1];
      const keyOf = (r: ListRow): ListKey =>
        claimOrder ? { priority: r.priority, runAt: r.run_at_key as string, id: String(r.id) } : { id: String(r.id) };
      if (found.length > want) {
        // More of this state than the page has room for: the next page starts after the last taken.
        return { jobs, next: { state, key: keyOf(last) } };
      }
      if (name !== undefined && scanned >= FILTER_SCAN_LIMIT && scan_end) {
        // A filtered scan stopped at its bound before the state's end: go on from where it stopped.
        key = scan_end;
        continue;
      }
      i++;
      key = null;
    }
    return { jobs, next: null };
  }

  /** Counts of one queue per state; the history states only when `history` asks for them (else null). */
  async counts(
    queue: string,
    history: { completed: boolean; failed: boolean; cancelled: boolean },
    db: SqlExecutor = this.ctx.db,
  ): Promise<Record<JobState, number | null>> {
    const [r] = await db.query<{
      waiting: number;
      delayed: number;
      active: number;
      waiting_children: number;
      completed: number | null;
      failed: number | null;
      cancelled: number | null;
    }>(this.q.jobCounts, [queue, history.completed, history.failed, history.cancelled]);
    return {
      waiting: r.waiting,
      delayed: r.delayed,
      active: r.active,
      'waiting-children': r.waiting_children,
      completed: r.completed,
      failed: r.failed,
      cancelled: r.cancelled,
    };
  }

  /** The live job of `queue` holding unique key `key`, or null. */
  async byKey<T>(queue: string, key: string, db: SqlExecutor = this.ctx.db): Promise<Job<T> | null> {
    const [r] = await db.query<JobRow>(this.q.byKey, [queue, key]);
    return r ? rowToJob<T>(r) : null;
  }
}
