import { escapeIdentifier } from 'pg';
import type { ListFilters, ListKey, ListState } from '../core/dashboard-reads';
import { historyByIdParamSql } from './history/by-id';
import { byLayout, HISTORY_COLS, LIVE_COLS } from './job-row';
import { liveCountsSql, waitingChildrenSql } from './reads';

/** The most job names a queue page lists (its name filter's choices). */
export const MAX_NAMES = 1000;

/** The most nodes, schedules and queues one dashboard answer lists: every list is capped. */
export const MAX_ROWS = 1000;

/** The most index entries one filtered page examines: a rare name or payload never walks a million rows. */
export const FILTER_SCAN_LIMIT = 5000;

/** `run_at` as the text a claim-order cursor carries: UTC, microseconds, parsed back exactly. */
const RUN_AT_KEY = `pg_catalog.to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')`;

/**
 * One page of a queue's jobs in one state, by keyset (never OFFSET). Built from a fixed
 * vocabulary: the state picks the table, index and order; filters add bind parameters.
 *
 * Shape: `scan` walks the state's index in its order from the cursor and stops after
 * `scanLimit` entries (the page size + 1 without filters; FILTER_SCAN_LIMIT with a name or
 * payload filter, which need the row), reading only index columns; `page` reads those rows by
 * primary key, applies the filters and keeps the first `limit + 1`. The single-row `e` says how
 * far the scan went, so a filtered page that found fewer jobs than asked still tells where the
 * next one continues. Indexes per state:
 * - waiting / delayed: jobs_claim_idx (queue, priority, run_at, id) WHERE state = 'waiting',
 *   the claim's own order; the run_at bound is an index condition.
 * - active: jobs_active_idx (queue, locked_until) WHERE state = 'active': as many entries as
 *   jobs running now, sorted by id.
 * - waiting-children: jobs_waiting_children_idx (queue, id) WHERE state = 'waiting-children',
 *   newest first, in the index's own order.
 * - completed / failed / cancelled: job_history_queue_state_idx (queue, state, id), newest first;
 *   `page` names the state too, so its lookups by id visit only that state's partitions of the
 *   history (failed jobs have their own): without it each id probed every partition's id index
 *   (361 buffers against 208 for a page of failed jobs, bench/dashboard-plans.mjs).
 * - uniqueKey (live states): jobs_unique_key_idx (queue, unique_key): at most one row.
 * - group, waiting / delayed: jobs_group_claim_idx (queue, group_key, priority, run_at, id)
 *   WHERE state = 'waiting' AND group_key IS NOT NULL: that group's jobs only, in claim order, the
 *   cursor an index condition; active: jobs_active_idx, the queue's running jobs (as many as run
 *   on all nodes), the group a row filter. waiting-children and history have no group index (one on the
 *   partitioned history would cost every finished job an entry): there the group is a row
 *   filter, over at most FILTER_SCAN_LIMIT entries of the state's index, as a name is.
 * Parameters: $1 queue, then in order: cursor values, unique key, scan limit, filters, limit.
 */
export function buildJobList(
  schema: string,
  state: ListState,
  opts: { readonly queue: string; readonly cursor: ListKey | null; readonly filters: ListFilters; readonly limit: number },
): { text: string; values: unknown[] } {
  const s = escapeIdentifier(schema);
  const values: unknown[] = [];
  const p = (v: unknown): string => {
    values.push(v);
    return `$${values.length}`;
  };
  const queue = p(opts.queue);
  const live = state === 'waiting' || state === 'delayed' || state === 'active' || state === 'waiting-children';
  const claimOrder = state === 'waiting' || state === 'delayed';
  const table = live ? `${s}.jobs` : `${s}.job_history`;
  const where: string[] = [`queue = ${queue}`];
  if (state === 'waiting') where.push(`state = 'waiting'`, 'run_at <= now()');
  else if (state === 'delayed') where.push(`state = 'waiting'`, 'run_at > now()');
  else if (state === 'active') where.push(`state = 'active'`);
  else if (state === 'waiting-children') where.push(`state = 'waiting-children'`);
  const stateParam = live ? null : p(state);
  if (stateParam) where.push(`state = ${stateParam}`);
  const c = opts.cursor;
  if (c && claimOrder && 'runAt' in c) {
    where.push(
      `(priority, run_at, id) > (${p(c.priority)}::int, ${p(c.runAt)}::timestamp AT TIME ZONE 'UTC', ${p(c.id)}::bigint)`,
    );
  } else if (c) {
    where.push(`id < ${p(c.id)}::bigint`);
  }
  if (opts.filters.uniqueKey !== undefined) where.push(`unique_key = ${p(opts.filters.uniqueKey)}`);
  // The group partial indexes hold waiting and active jobs; `IS NOT NULL` is their predicate.
  const groupIndexed = opts.filters.group !== undefined && (claimOrder || state === 'active');
  if (groupIndexed) where.push(`group_key = ${p(opts.filters.group)}`, 'group_key IS NOT NULL');
  const groupRow = opts.filters.group !== undefined && !groupIndexed;
  const filtered = opts.filters.name !== undefined || opts.filters.payloadJson !== undefined || groupRow;
  const scanLimit = p(filtered ? FILTER_SCAN_LIMIT : opts.limit + 1);
  const rowFilter: string[] = [];
  if (opts.filters.name !== undefined) rowFilter.push(`name = ${p(opts.filters.name)}`);
  if (opts.filters.payloadJson !== undefined) rowFilter.push(`payload @> ${p(opts.filters.payloadJson)}::jsonb`);
  if (groupRow) rowFilter.push(`group_key = ${p(opts.filters.group)}`);
  const limit = p(opts.limit + 1);
  const order = claimOrder ? 'priority, run_at, id' : 'id DESC';
  const pageOrder = claimOrder ? 'page.priority, page.run_at, page.id' : 'page.id DESC';
  const reverse = claimOrder ? 'priority DESC, run_at DESC, id DESC' : 'id';
  // unique_key is in both column lists (finished jobs keep it since migration 13).
  const cols = `${live ? LIVE_COLS : HISTORY_COLS}, locked_by`;
  const keyCols = claimOrder ? 'id, priority, run_at' : 'id';
  const text = `
    WITH scan AS MATERIALIZED (
      SELECT ${keyCols} FROM ${table} WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT ${scanLimit}
    ), page AS (
      SELECT ${cols}, ${RUN_AT_KEY} AS run_at_key FROM ${table}
      WHERE id IN (SELECT id FROM scan) ${stateParam ? `AND state = ${stateParam}` : ''} ${rowFilter.map((f) => `AND ${f}`).join(' ')}
      ORDER BY ${order} LIMIT ${limit}
    ), e AS (
      SELECT (SELECT count(*) FROM scan)::int AS scanned,
             (SELECT pg_catalog.json_build_object('id', id::text${claimOrder ? `, 'priority', priority, 'runAt', ${RUN_AT_KEY}` : ''})
              FROM scan ORDER BY ${reverse} LIMIT 1) AS scan_end
    )
    SELECT page.*, e.scanned, e.scan_end FROM e LEFT JOIN page ON true ORDER BY ${pageOrder}`;
  return { text, values };
}

/** The dashboard's reads and its few writes that the engine has no statement for, for one schema. */
export function buildDashboardQueries(schema: string) {
  const s = escapeIdentifier(schema);
  const jobs = `${s}.jobs`;
  const history = `${s}.job_history`;
  return {
    /**
     * The overview's live figures per queue: counts from index-only scans of the claim and
     * active partial indexes (liveCountsSql), paused from the queues table. Lists every queue
     * that has live jobs, a queues row, or is registered in this app ($1); historyCounts adds
     * those with only history. Two statements, not one, so the store runs them at once on two
     * connections: as one statement the history counts waited for the live ones (27 / 35 ms
     * p50 / p95 against 16 / 28 ms for the pair, 100,000 waiting and 1,000,000 finished jobs,
     * 2 cores shared). $1 registered names[] $2 one queue or NULL (all)
     */
    liveCounts: `
      WITH live AS (${liveCountsSql(jobs, '$2', s)}
      ), parents AS (${waitingChildrenSql(jobs, '$2')}
      ), names AS (
        SELECT queue FROM live UNION SELECT queue FROM parents
        UNION SELECT name FROM ${s}.queues WHERE $2::text IS NULL OR name = $2
        UNION SELECT n FROM pg_catalog.unnest($1::text[]) n WHERE $2::text IS NULL OR n = $2
      )
      SELECT n.queue AS name, coalesce(l.waiting, 0)::int AS waiting, coalesce(l.delayed, 0)::int AS delayed,
             coalesce(l.active, 0)::int AS active, coalesce(l.stalled, 0)::int AS stalled,
             coalesce(w.waiting_children, 0)::int AS waiting_children,
             coalesce(l.sleeping, 0)::int AS sleeping, coalesce(l.waiting_signal, 0)::int AS waiting_signal,
             coalesce(q.paused, false) AS paused, l.oldest_waiting_age_ms
      FROM names n
      LEFT JOIN live l ON l.queue = n.queue
      LEFT JOIN parents w ON w.queue = n.queue
      LEFT JOIN ${s}.queues q ON q.name = n.queue
      ORDER BY n.queue COLLATE "C" LIMIT ${MAX_ROWS}`,

    /**
     * Failed and cancelled jobs per queue, each from its partial index on job_history
     * (job_history_failed_idx, job_history_cancelled_idx), index-only. The literal states
     * let the planner match those partial indexes. $1 one queue or NULL (all)
     */
    historyCounts: `
      WITH failed AS (
        SELECT queue, count(*) AS n FROM ${history} WHERE state = 'failed' AND ($1::text IS NULL OR queue = $1) GROUP BY queue
      ), cancelled AS (
        SELECT queue, count(*) AS n FROM ${history} WHERE state = 'cancelled' AND ($1::text IS NULL OR queue = $1) GROUP BY queue
      )
      SELECT coalesce(f.queue, c.queue) AS name, coalesce(f.n, 0)::int AS failed, coalesce(c.n, 0)::int AS cancelled
      FROM failed f FULL JOIN cancelled c ON c.queue = f.queue
      ORDER BY coalesce(f.queue, c.queue) COLLATE "C" LIMIT ${MAX_ROWS}`,

    /**
     * Completed and failed jobs per minute over the last 60 minutes (the current one included),
     * every minute present, on the database clock; minutes before $1 (when given) answer 0, as
     * the caller has them already. Each minute is two bounded range counts: failed jobs on
     * job_history_failed_retention_idx (state, finished_at), index-only; completed ones on the
     * BRIN index of finished_at of the ranged partitions (migration 11: the btree there cost every
     * completed job an index entry), which reads the heap pages of the minute: 29,348 pages and
     * 260 ms for the whole hour at 1,000,000 jobs in it, against 1,266 buffers and 50-80 ms on
     * the btree, and 408 buffers, 3.6 ms, for a later poll (JIT off: see DashboardStore). A
     * minute that ended by $1 is not looked up. Grouping by date_trunc('minute', finished_at) instead evaluated
     * and hashed every row: 120-180 ms for the whole hour with 940,000 rows finished in it, against
     * 55-80 ms here (bench/dashboard-plans.mjs). The whole hour is still the costly read, so the
     * dashboard counts it once and then only the minutes not yet settled each poll (DashboardService).
     * $1 from (timestamptz) or NULL
     */
    throughput: `
      SELECT m.minute,
             CASE WHEN m.minute + interval '1 minute' <= $1::timestamptz THEN 0 ELSE
               (SELECT count(*) FROM ${history} WHERE state = 'completed'
                  AND finished_at >= greatest(m.minute, $1::timestamptz) AND finished_at < m.minute + interval '1 minute') END::int AS completed,
             CASE WHEN m.minute + interval '1 minute' <= $1::timestamptz THEN 0 ELSE
               (SELECT count(*) FROM ${history} WHERE state = 'failed'
                  AND finished_at >= greatest(m.minute, $1::timestamptz) AND finished_at < m.minute + interval '1 minute') END::int AS failed,
             now() AS now
      FROM pg_catalog.generate_series(pg_catalog.date_trunc('minute', now()) - interval '59 minutes', pg_catalog.date_trunc('minute', now()), interval '1 minute') m(minute)
      ORDER BY m.minute`,

    /**
     * Job names seen in a queue: those of its first 2,000 waiting jobs in claim order, 1,000
     * active, 1,000 waiting on children and 5,000 finished, at most 1,000 names. Each part walks
     * an index that holds only its state (jobs_claim_idx, jobs_active_idx,
     * jobs_waiting_children_idx, job_history_queue_state_idx newest first) and stops at its
     * LIMIT. The live part was `WHERE queue = $1 LIMIT 5000` on jobs, which no index serves: a
     * sequential scan that, for a queue with few jobs among a million others', read the whole
     * table on every 2 s poll. Names are not in those indexes, so each part reads its rows' heap
     * pages: 9,000 rows at most, on an index bound. The service also keeps the answer a while.
     * $1 queue
     */
    names: `
      SELECT name FROM (
        (SELECT name FROM ${jobs} WHERE queue = $1 AND state = 'waiting' ORDER BY priority, run_at, id LIMIT 2000)
        UNION
        (SELECT name FROM ${jobs} WHERE queue = $1 AND state = 'active' ORDER BY locked_until LIMIT 1000)
        UNION
        (SELECT name FROM ${jobs} WHERE queue = $1 AND state = 'waiting-children' ORDER BY id DESC LIMIT 1000)
        UNION
        (SELECT name FROM ${history} WHERE queue = $1 ORDER BY state DESC, id DESC LIMIT 5000)
      ) n ORDER BY name LIMIT ${MAX_NAMES}`,

    /** One job, live or finished, with what the job page shows beyond Job. $1 id */
    job: `
      SELECT ${LIVE_COLS}, locked_by, false AS history, trace FROM ${jobs} WHERE id = $1
      UNION ALL
      SELECT ${HISTORY_COLS}, locked_by, true, trace FROM ${history} WHERE id = $1`,
    /** job for each history layout: only the history partitions that can hold the id. $1 id, then idLookup's values (history/by-id.ts) */
    jobIn: byLayout(
      (layout) => `
      SELECT ${LIVE_COLS}, locked_by, false AS history, trace FROM ${jobs} WHERE id = $1::bigint
      UNION ALL
      SELECT ${HISTORY_COLS}, locked_by, true, trace FROM (
        ${layout === 'flat' ? `SELECT * FROM ${history} WHERE id = $1` : historyByIdParamSql(schema, '*', layout)}) h`,
    ),

    /**
     * The jobs that wait on a job (its parents), each as it is now, first 100 by id: the edges'
     * primary key (child_id, parent_id), then two primary-key probes each. $1 id
     */
    parents: `
      SELECT d.parent_id::text AS id, coalesce(l.queue, h.queue) AS queue, coalesce(l.name, h.name) AS name,
             coalesce(CASE WHEN l.state = 'waiting' AND l.run_at > now() THEN 'delayed' ELSE l.state END, h.state) AS state
      FROM ${s}.job_dependencies d
      LEFT JOIN ${jobs} l ON l.id = d.parent_id
      LEFT JOIN ${history} h ON h.id = d.parent_id
      WHERE d.child_id = $1 ORDER BY d.parent_id LIMIT 100`,

    /** How many children a job has, and how many of them are still live. $1 id */
    childCounts: `
      SELECT count(*)::int AS total, count(*) FILTER (WHERE state IS NULL)::int AS pending
      FROM ${s}.job_dependencies WHERE parent_id = $1`,

    /** Where jobs are: their queue and state, live or finished (primary keys). $1 id[] */
    locate: `
      SELECT id::text AS id, queue, state FROM ${jobs} WHERE id = ANY($1::bigint[])
      UNION ALL
      SELECT id::text, queue, state FROM ${history} WHERE id = ANY($1::bigint[])`,

    /**
     * Live nodes (seen within 3 of their heartbeat intervals) and the jobs each runs now: one
     * pass over jobs_active_idx (as many entries as jobs running), grouped by worker. No parameters.
     */
    nodes: `
      WITH running AS (
        SELECT locked_by, count(*)::int AS n FROM ${jobs} WHERE state = 'active' GROUP BY locked_by
      )
      SELECT n.id, n.host, n.pid, n.started_at, n.last_seen_at, n.heartbeat_ms, n.queues, coalesce(r.n, 0) AS running
      FROM ${s}.nodes n LEFT JOIN running r ON r.locked_by = n.id
      WHERE n.last_seen_at > now() - (3 * n.heartbeat_ms)::float8 * interval '1 millisecond'
      ORDER BY n.host, n.pid, n.id LIMIT ${MAX_ROWS}`,

    /** The job schedulers of every queue (migration 0014), the first MAX_ROWS by queue and id. No parameters. */
    schedules: `SELECT queue, id, job_name, pattern, every_ms, tz, next_run_at, paused, source, count, "limit", end_at
                FROM ${s}.job_schedulers ORDER BY queue, id LIMIT ${MAX_ROWS}`,

    /**
     * Retry by ids from any queue: failed, cancelled or completed jobs go back to waiting under
     * their own id, fresh attempts, errors kept (as queue.retry does: a completed job's result is
     * dropped, Bull Board's retry of a completed job), with one wake-up per queue.
     * $1 id[] $2 channel
     */
    retryIds: `
      WITH h AS (
        DELETE FROM ${history} WHERE id = ANY($1::bigint[]) AND state IN ('failed', 'cancelled', 'completed') RETURNING *
      ), back AS (
        INSERT INTO ${jobs} (id, queue, name, payload, priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at,
                             progress, trace, logs, group_key)
        OVERRIDING SYSTEM VALUE
        SELECT id, queue, name, payload, priority, now(), 0, max_attempts, backoff, timeout_ms, errors, created_at, progress, trace, logs, group_key FROM h
        RETURNING id, queue
      ), wake AS (SELECT pg_catalog.pg_notify($2, queue || '|0') FROM back GROUP BY queue)
      SELECT id::text AS id, (SELECT count(*) FROM wake) AS woken FROM back`,

    /**
     * Retry every failed job of a queue, optionally of one job name, a batch at a time (the
     * caller loops): the batch is found on job_history_queue_state_idx.
     * $1 queue $2 name or NULL $3 batch $4 channel
     */
    retryFailed: `
      WITH h AS (
        DELETE FROM ${history} WHERE id IN (
          SELECT id FROM ${history} WHERE queue = $1 AND state = 'failed' AND ($2::text IS NULL OR name = $2) LIMIT $3)
        RETURNING *
      ), back AS (
        INSERT INTO ${jobs} (id, queue, name, payload, priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at,
                             progress, trace, logs, group_key)
        OVERRIDING SYSTEM VALUE
        SELECT id, queue, name, payload, priority, now(), 0, max_attempts, backoff, timeout_ms, errors, created_at, progress, trace, logs, group_key FROM h
        RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($4, $1 || '|0') WHERE EXISTS (SELECT 1 FROM back))
      SELECT count(*)::int AS n, (SELECT count(*) FROM wake) AS woken FROM back`,
  };
}

export type DashboardQueries = ReturnType<typeof buildDashboardQueries>;
