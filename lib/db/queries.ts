import { escapeIdentifier } from 'pg';
import { historyByIdParamSql, type HistoryLayout } from './history-by-id';

/** Columns every job-returning query selects, in the order `rowToJob` expects (the dashboard reads them too). */
export const LIVE_COLS = `id, queue, name, payload,
  CASE WHEN state = 'waiting' AND run_at > now() THEN 'delayed' ELSE state END AS state,
  priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at, started_at,
  NULL::timestamptz AS finished_at, NULL::jsonb AS result, progress`;
export const HISTORY_COLS = `id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
  backoff, timeout_ms, errors, created_at, started_at, finished_at, result, progress`;
// locked_by: the worker of the final attempt (the dashboard's job page names it). progress and
// trace follow the job into history: its last reported progress, and the trace it belongs to.
const ARCHIVE_COLS = `id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
  backoff, timeout_ms, errors, result, created_at, started_at, finished_at, locked_by, progress, trace`;
/**
 * The live columns a completion carries into history (ARCHIVE_COLS less those it sets itself):
 * what its DELETE returns, instead of `j.*` and the columns history has no place for.
 */
const ARCHIVE_SOURCE = `j.id, j.queue, j.name, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
  j.backoff, j.timeout_ms, j.errors, j.created_at, j.started_at, j.locked_by, j.progress, j.trace`;

/**
 * The error recorded when a lease runs out: the worker died, or its event loop stalled. (An
 * active row without a lease was written by hand: the library sets both in one statement.)
 */
const LEASE_ERROR = `jsonb_build_array(jsonb_build_object(
  'attempt', j.attempt, 'name', 'LeaseExpiredError', 'at', now(), 'worker', j.locked_by,
  'message', CASE WHEN j.locked_until IS NULL
    THEN 'Job was active without a lease (locked_until is NULL, so no worker renews it); handed back to the queue.'
    ELSE 'Lease expired at ' || j.locked_until || ' while worker ' || coalesce(j.locked_by, '?') ||
         ' held the job (it died, was killed, or stalled longer than leaseMs).' END))`;

/** The listener's one statement: subscribe its dedicated connection to the wake-up channel. */
export function listenSql(channel: string): string {
  return `LISTEN ${escapeIdentifier(channel)}`;
}

/**
 * The live counts per queue (waiting, delayed, active, stalled, oldest waiting age) as a
 * subquery, for `counts` here and the dashboard's. It reads only columns of the partial indexes,
 * so each half is an index-only scan: jobs_claim_idx (queue, priority, run_at, id) WHERE
 * state = 'waiting' has run_at for the waiting/delayed split and the oldest age; jobs_active_idx
 * (queue, locked_until) WHERE state = 'active' has the lease for stalled. The former single pass
 * over jobs read every heap page (payloads included) for one queue too: a queue page's counts
 * went from 69 to 18-27 ms at p95 with 100,000 waiting jobs (bench/dashboard-plans.mjs).
 * The waiting half finds its queues by a skip scan (PostgreSQL has none before 18): a recursive
 * CTE probes jobs_claim_idx for the next queue name (for one queue, it starts and ends at that
 * queue, a queue without waiting jobs counting 0), then counts each queue on that index. A
 * GROUP BY over all queues got a parallel seq scan of jobs instead, whose worker start alone
 * cost tens of ms on a loaded machine: 23 / 45 ms p50 / p95 against 16 / 25 ms here, with
 * 100,000 waiting jobs in two queues (2 cores, shared). The active half stays a GROUP BY: it
 * has as many entries as jobs running now. An index-only scan visits a heap page that is not
 * all-visible; autovacuum runs early on jobs. `queueParam` is the bind parameter of one queue,
 * or NULL for all.
 */
export function liveCountsSql(jobs: string, queueParam: string): string {
  return `
    WITH RECURSIVE waiting_queues AS (
      SELECT coalesce(${queueParam}::text, (SELECT min(queue) FROM ${jobs} WHERE state = 'waiting')) AS queue
      UNION ALL
      SELECT (SELECT j.queue FROM ${jobs} j WHERE j.state = 'waiting' AND j.queue > w.queue AND ${queueParam}::text IS NULL
              ORDER BY j.queue LIMIT 1)
      FROM waiting_queues w WHERE w.queue IS NOT NULL
    )
    SELECT queue, sum(waiting)::bigint AS waiting, sum(delayed)::bigint AS delayed, sum(active)::bigint AS active,
           sum(stalled)::bigint AS stalled, extract(epoch FROM now() - min(oldest))::float8 * 1000 AS oldest_waiting_age_ms
    FROM (
      SELECT w.queue, c.waiting, c.delayed, 0 AS active, 0 AS stalled, c.oldest
      FROM waiting_queues w CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE run_at <= now()) AS waiting, count(*) FILTER (WHERE run_at > now()) AS delayed,
               min(run_at) FILTER (WHERE run_at <= now()) AS oldest
        FROM ${jobs} WHERE state = 'waiting' AND queue = w.queue) c
      WHERE w.queue IS NOT NULL
      UNION ALL
      SELECT queue, 0, 0, count(*), count(*) FILTER (WHERE locked_until < now()), NULL
      FROM ${jobs} WHERE state = 'active' AND (${queueParam}::text IS NULL OR queue = ${queueParam}) GROUP BY queue
    ) l GROUP BY queue`;
}

/**
 * Jobs waiting on their children, per queue, from jobs_waiting_children_idx (which holds only
 * them): an index-only count. Kept apart from liveCountsSql, whose two halves read the claim and
 * active indexes. `queueParam` as there.
 */
export function waitingChildrenSql(jobs: string, queueParam: string): string {
  return `
    SELECT queue, count(*)::bigint AS waiting_children FROM ${jobs}
    WHERE state = 'waiting-children' AND (${queueParam}::text IS NULL OR queue = ${queueParam}) GROUP BY queue`;
}

/** The batched retention delete on one table of the history (`prune` and its variants). */
function pruneSql(table: string): string {
  return `
      DELETE FROM ${table} WHERE id IN (
        SELECT id FROM ${table}
        WHERE (state = 'completed' AND finished_at < now() - $1::bigint * interval '1 millisecond')
           OR (state = 'cancelled' AND finished_at < now() - $3::bigint * interval '1 millisecond')
           OR (state = 'failed' AND finished_at < now() - $4::bigint * interval '1 millisecond')
        LIMIT $2)`;
}

/**
 * Every statement the engine runs, for one schema. The schema was validated at boot and is
 * quoted here as well; every value travels as a bind parameter.
 */
export function buildQueries(schema: string, opts: { asyncCommit: boolean } = { asyncCommit: true }) {
  const s = escapeIdentifier(schema);
  // Claims, outcomes and heartbeats may commit without waiting for the WAL flush: a claim of 50
  // jobs took 4.6 ms with it and about 1 ms without (bench/). Losing one in a server crash only
  // means the job runs again, which at-least-once allows; enqueues always commit durably.
  // Batch statements look up each row's values by its position in the id array. A join with
  // unnest(...) planned, as a prepared statement, a nested loop re-reading the whole unnest for
  // every row: 61 ms for 450 jobs, quadratic (measured); array_position is a tight loop in C.
  const at = 'array_position($1::bigint[], j.id)';
  // The completions' attempt guard. A guard looking each row's attempt up by its position in an
  // attempt[] (array_position scans the id array) cost a batch of n n^2/2 comparisons: 2-3 us
  // per job at 480 measured alone (PostgreSQL 15). Nearly every batch is of one attempt (first
  // attempts): it comes as that one number; a batch of mixed attempts as a JSON object keyed by
  // id, a binary search per row. Without the scan the server's CPU per drained job fell by 10 %
  // (README, Benchmarks). `byId` names the object's parameter.
  const attemptOk = (byId: string) => `j.attempt = coalesce($2::int, (${byId}::jsonb ->> j.id::text)::int)`;
  const ack = opts.asyncCommit ? `AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'` : '';
  // The cron tick is an enqueue on the queue's own connection: durable whatever the server default.
  const jobs = `${s}.jobs`;
  const history = `${s}.job_history`;
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
     * $1 queue $2 limit $3 worker id $4 lease ms
     */
    claim: `
      UPDATE ${jobs} j
      SET state = 'active', attempt = least(j.attempt, 2147483646) + 1, locked_by = $3,
          locked_until = now() + $4 * interval '1 millisecond', started_at = now()
      WHERE j.id = ANY(ARRAY(
        SELECT id FROM ${jobs}
        WHERE state = 'waiting' AND queue = $1 AND run_at <= now()
          AND NOT EXISTS (SELECT 1 FROM ${s}.queues WHERE name = $1 AND paused)
        ORDER BY priority, run_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED)) ${ack}
      RETURNING j.id, j.name, j.payload, j.priority, j.attempt, j.max_attempts, j.backoff, j.timeout_ms,
                nullif(j.errors, '[]') AS errors, CASE WHEN j.cancel_requested_at IS NOT NULL THEN true END AS cancel_requested,
                extract(epoch FROM j.run_at)::float8 * 1000 AS run_at_ms,
                extract(epoch FROM j.created_at)::float8 * 1000 AS created_at_ms,
                extract(epoch FROM j.started_at)::float8 * 1000 AS started_at_ms, j.progress, j.trace`,

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
     * Completes a batch: the rows leave the live table and enter history in one statement.
     * (id, attempt, locked_by) must still match, so a worker that lost its lease cannot
     * complete the attempt another worker now owns. (locked_by is set only on active rows; not
     * naming `state` keeps the partial index of active jobs out of the generic plan, so the primary key
     * drives it however many jobs are active.) One row back whatever the batch (writtenRowSql): a
     * row per job cost the worker about 1 µs each to decode for nothing, as nearly every batch is
     * written whole. Results come as one JSON object keyed by id, a binary search per row where
     * a result[] looked up by position scanned the id array (2.1 against 0.2 us per job at 480,
     * PostgreSQL 15); a job without a result has no key, so its `out` is NULL.
     * $1 id[] (no duplicates) $2 every job's attempt (NULL when they differ) $3 results
     * (`{"id": result, ...}`, or NULL: every result NULL) $4 worker $5 attempts when they
     * differ (`{"id": attempt, ...}`, else NULL)
     */
    completeArchive: `
      WITH done AS (
        DELETE FROM ${jobs} j
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4
          AND ${attemptOk('$5')} ${ack}
        RETURNING ${ARCHIVE_SOURCE}, $3::jsonb -> j.id::text AS out
      ), archived AS (
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'completed', priority, run_at, attempt, max_attempts,
               backoff, timeout_ms, errors, out, created_at, started_at, now(), locked_by, progress, trace
        FROM done
        RETURNING id
      )
      ${writtenRowSql('archived')}`,

    /**
     * job.completeWith({ manager }): completes one attempt inside the caller's transaction, so
     * the handler's writes and the completion commit together. No asyncCommit here: that would
     * change the caller's whole transaction. 0 rows: the lease was lost. Top-level SELECT, which
     * TypeORM's query() answers with rows. $1 id $2 worker $3 attempt $4 result $5 keep history
     */
    completeInTransaction: `
      WITH done AS (
        DELETE FROM ${jobs} j WHERE j.id = $1 AND j.locked_by = $2 AND j.attempt = $3 RETURNING j.*
      ), archived AS (
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'completed', priority, run_at, attempt, max_attempts,
               backoff, timeout_ms, errors, $4::jsonb, created_at, started_at, now(), locked_by, progress, trace
        FROM done WHERE $5::boolean
      )
      SELECT count(*)::int AS n FROM done`,

    /**
     * Completes a batch without keeping history (retention.completedMs = 0). $1 id[] $2 attempt
     * (as completeArchive) $3 worker $4 attempts when they differ (as completeArchive's $5)
     */
    completeDelete: `
      WITH done AS (
        DELETE FROM ${jobs} j
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $3 AND ${attemptOk('$4')} ${ack}
        RETURNING j.id
      )
      ${writtenRowSql('done')}`,

    /**
     * Schedules the next attempt of failed jobs, appending each attempt's error.
     * $1 id[] $2 attempt[] $3 error[] (JSON objects) $4 delay_ms[] $5 worker
     */
    retry: `
      UPDATE ${jobs} j
      SET state = 'waiting', run_at = now() + ($4::bigint[])[${at}] * interval '1 millisecond',
          locked_by = NULL, locked_until = NULL,
          errors = j.errors || jsonb_build_array((($3::text[])[${at}])::jsonb || jsonb_build_object('worker', $5::text))
      WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $5 AND j.attempt = ($2::int[])[${at}] ${ack}
      RETURNING j.id`,

    /**
     * Moves jobs to history as failed (no attempts left) or cancelled, with the attempt's error.
     * $1 id[] $2 attempt[] $3 error[] $4 worker $5 'failed' | 'cancelled'
     */
    fail: `
      WITH failed AS (
        DELETE FROM ${jobs} j
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4 AND j.attempt = ($2::int[])[${at}] ${ack}
        RETURNING j.*, ($3::text[])[${at}] AS err
      )
      INSERT INTO ${history} (${ARCHIVE_COLS})
      SELECT id, queue, name, payload, $5::text, priority, run_at, attempt, max_attempts, backoff,
             timeout_ms, errors || jsonb_build_array(err::jsonb || jsonb_build_object('worker', $4::text)), NULL, created_at,
             started_at, now(), locked_by, progress, trace
      FROM failed
      RETURNING id`,

    /**
     * A handler snoozed its job: back to waiting after a delay, the attempt not counted.
     * $1 id[] $2 attempt[] $3 delay_ms[] $4 worker
     */
    snooze: `
      UPDATE ${jobs} j
      SET state = 'waiting', run_at = now() + ($3::bigint[])[${at}] * interval '1 millisecond',
          locked_by = NULL, locked_until = NULL, attempt = greatest(j.attempt - 1, 0)
      WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4 AND j.attempt = ($2::int[])[${at}] ${ack}
      RETURNING j.id`,

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
      SELECT (extract(epoch FROM min(n.run_at) - now()) * 1000)::float8 AS due_in_ms
      FROM p CROSS JOIN LATERAL (
        SELECT j.run_at FROM ${jobs} j
        WHERE j.queue = $1 AND j.state = 'waiting' AND j.priority = p.priority AND j.run_at > now()
        ORDER BY j.run_at LIMIT 1) n`,

    /**
     * job.updateProgress(): the latest progress of a running attempt, throttled by the worker to
     * one write per progressIntervalMs per job. Guarded like an outcome: (id, attempt, locked_by)
     * must still match, so a node that lost the lease changes nothing (0 rows). Not the claim's
     * hot path: only jobs whose handlers report progress run it. $1 id $2 attempt $3 worker $4 progress
     */
    setProgressIfRunning: `
      UPDATE ${jobs} SET progress = $4::jsonb
      WHERE id = $1 AND locked_by = $3 AND attempt = $2 ${ack}
      RETURNING id`,

    /**
     * Renews the leases of every job this worker runs and keeps its row in the nodes registry
     * fresh, in one statement (one round trip per heartbeat, as before the registry). A
     * data-modifying CTE runs to completion whether or not the UPDATE reads it. The upsert
     * touches one row of a table as small as the number of nodes.
     * $1 id[] $2 worker $3 lease ms $4 host $5 pid $6 started at $7 heartbeat ms $8 queues (JSON)
     */
    heartbeat: `
      WITH node AS (
        INSERT INTO ${s}.nodes (id, host, pid, started_at, last_seen_at, heartbeat_ms, queues)
        VALUES ($2, $4, $5, $6, now(), $7, $8::jsonb)
        ON CONFLICT (id) DO UPDATE SET last_seen_at = now(), heartbeat_ms = EXCLUDED.heartbeat_ms, queues = EXCLUDED.queues
      )
      UPDATE ${jobs} SET locked_until = now() + $3 * interval '1 millisecond'
      WHERE id = ANY($1::bigint[]) AND locked_by = $2 ${ack}
      RETURNING id, cancel_requested_at IS NOT NULL AS cancel`,

    /** Clean shutdown: this node leaves the registry. $1 worker */
    removeNode: `DELETE FROM ${s}.nodes WHERE id = $1`,

    /**
     * Maintenance: drops nodes not seen for 10 of their own heartbeat intervals (killed, or cut
     * off from the database). The dashboard already hides them after 3. No parameters.
     */
    pruneNodes: `DELETE FROM ${s}.nodes WHERE last_seen_at < now() - 10 * heartbeat_ms * interval '1 millisecond'`,

    /** Nodes seen within 3 of their own heartbeat intervals (as the dashboard lists them), for health and metrics. */
    liveNodeIds: `SELECT id FROM ${s}.nodes WHERE last_seen_at > now() - 3 * heartbeat_ms * interval '1 millisecond'`,

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
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'cancelled', priority, run_at, attempt, max_attempts, backoff,
               timeout_ms, errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'name', 'CancelJobError',
                 'message', 'Cancelled by queue.cancel() while waiting.', 'at', now())),
               NULL, created_at, started_at, now(), locked_by, progress, trace
        FROM waiting RETURNING id
      ), running AS (
        UPDATE ${jobs} j SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
        FROM target t WHERE j.id = t.id AND t.state = 'active' RETURNING j.id
      ), wake AS (SELECT pg_notify($3, '!cancel|' || id) FROM running)
      SELECT (SELECT count(*) FROM archived)::int AS cancelled, (SELECT count(*) FROM running)::int AS cancelling,
             (SELECT count(*) FROM wake)::int AS notified`,

    /**
     * Pause or resume a queue for every node. Pausing tells running workers to hand back the
     * jobs they prefetched; resuming wakes them. $1 queue $2 paused $3 channel
     */
    setPaused: `
      WITH up AS (
        INSERT INTO ${s}.queues (name, paused) VALUES ($1, $2) ON CONFLICT (name)
        DO UPDATE SET paused = EXCLUDED.paused, updated_at = now() RETURNING name
      )
      SELECT pg_notify($3, CASE WHEN $2 THEN '!pause|' || name ELSE name || '|0' END) FROM up`,

    /** $1 queue */
    isPaused: `SELECT coalesce((SELECT paused FROM ${s}.queues WHERE name = $1), false) AS paused`,

    /**
     * Shutdown: hands unfinished jobs back without counting the interrupted attempt, and rings
     * the doorbell so another worker takes them at once. run_at stays: it was due already (so the
     * job keeps its place at the head of the queue), and a recurring job's run_at is its tick.
     * The wake-up's due time is -1, not 0: that old run_at may lie outside a worker's claim
     * window (claimSince), so it asks for the catch-up claim; a node that predates the window reads
     * any due time <= 0 as "now". $1 id[] $2 worker $3 channel
     */
    handBack: `
      WITH back AS (
        UPDATE ${jobs} SET state = 'waiting', locked_by = NULL, locked_until = NULL,
               attempt = greatest(attempt - 1, 0)
        WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND state = 'active'
        RETURNING id, queue
      ), wake AS (SELECT pg_notify($3, queue || '|-1') FROM back GROUP BY queue)
      SELECT id, (SELECT count(*) FROM wake) AS woken FROM back`,

    /**
     * The rescuer: jobs whose lease expired go back to waiting (the attempt counts) or, after
     * their last attempt, to history as failed, with the lease error recorded. A NULL lease
     * counts as expired: nothing would ever renew it, and the job would stay active for good.
     * $1 batch size $2 channel
     */
    rescue: `
      WITH expired AS (
        SELECT id FROM ${jobs} WHERE state = 'active' AND (locked_until < now() OR locked_until IS NULL)
        ORDER BY locked_until LIMIT $1 FOR UPDATE SKIP LOCKED
      ), retried AS (
        UPDATE ${jobs} j
        SET state = 'waiting', locked_by = NULL, locked_until = NULL, run_at = now(),
            errors = j.errors || ${LEASE_ERROR}
        FROM expired e WHERE j.id = e.id AND j.attempt < j.max_attempts
        RETURNING j.id, j.queue, j.name, j.attempt
      ), dead AS (
        DELETE FROM ${jobs} j USING expired e
        WHERE j.id = e.id AND j.attempt >= j.max_attempts
        RETURNING j.*, ${LEASE_ERROR} AS err
      ), archived AS (
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'failed', priority, run_at, attempt, max_attempts, backoff,
               timeout_ms, errors || err, NULL, created_at, started_at, now(), locked_by, progress, trace
        FROM dead RETURNING id, queue, name, attempt
      ), wake AS (SELECT pg_notify($2, queue || '|0') FROM retried GROUP BY queue)
      SELECT id, queue, name, attempt, true AS retried, (SELECT count(*) FROM wake) AS woken FROM retried
      UNION ALL
      SELECT id, queue, name, attempt, false, 0 FROM archived`,

    /**
     * Deletes finished jobs past their state's retention, a small batch at a time (three ranges
     * of the (state, finished_at) index of the failed, default and pre-version-10 tables; the
     * ranged partitions have only a BRIN index on finished_at since migration 11, and their rows
     * are in finish order), over the whole history: for failed jobs, and for a state
     * whose retention is shorter than a partition (lib/db/history-partitions.ts drops the rest
     * whole). $1 completed ms (NULL: none deleted) $2 batch $3 cancelled ms (NULL: none)
     * $4 failed ms (NULL: kept for ever)
     */
    prune: pruneSql(history),
    /** The same, on the pre-version-10 history table only (rows older than the partitions). */
    pruneLegacy: pruneSql(`${s}.job_history_legacy`),
    /** The same, on the default partition only (rows that finished while no partition was there). */
    pruneDoneDefault: pruneSql(`${s}.job_history_done_default`),
    /** Which partitioned layout the history has (migrations/0010_history_partitions.sql). No parameters. */
    historyLayout: `
      SELECT to_regclass('${s}.job_history_current') IS NOT NULL AS current,
             to_regclass('${s}.job_history_legacy') IS NOT NULL AS legacy`,

    /**
     * A failed job's last attempt moves it to the dead-letter queue instead: waiting there, its
     * attempts reset, its errors kept; its unique key is dropped (it may clash there).
     * $1 id[] $2 attempt[] $3 error[] $4 worker $5 dead-letter queue $6 channel
     */
    deadLetter: `
      WITH moved AS (
        UPDATE ${jobs} j
        SET queue = $5, state = 'waiting', attempt = 0, run_at = now(), locked_by = NULL, locked_until = NULL,
            unique_key = NULL, cancel_requested_at = NULL,
            errors = j.errors || jsonb_build_array((($3::text[])[${at}])::jsonb || jsonb_build_object('worker', $4::text))
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4 AND j.attempt = ($2::int[])[${at}] ${ack}
        RETURNING j.id
      ), wake AS (SELECT pg_notify($6, $5 || '|0') WHERE EXISTS (SELECT 1 FROM moved))
      SELECT id, (SELECT count(*) FROM wake) AS woken FROM moved`,

    /**
     * queue.retry(id) / retryFailed(): failed or cancelled jobs of a queue go back to waiting
     * under their own id, with fresh attempts and their errors kept. $1 id[] or NULL (every
     * failed job) $2 queue $3 batch $4 channel
     */
    retryFinished: `
      WITH h AS (
        DELETE FROM ${history} WHERE id IN (
          SELECT id FROM ${history}
          WHERE queue = $2 AND (CASE WHEN $1::bigint[] IS NULL THEN state = 'failed'
                                     ELSE id = ANY($1::bigint[]) AND state IN ('failed', 'cancelled') END)
          LIMIT $3)
        RETURNING *
      ), back AS (
        INSERT INTO ${jobs} (id, queue, name, payload, priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at,
                             progress, trace)
        OVERRIDING SYSTEM VALUE
        SELECT id, queue, name, payload, priority, now(), 0, max_attempts, backoff, timeout_ms, errors, created_at, progress, trace FROM h
        RETURNING id
      ), wake AS (SELECT pg_notify($4, $2 || '|0') WHERE EXISTS (SELECT 1 FROM back))
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
             set_config('pgqueue.removing_job', $1::text, true) IS NOT NULL AS marked`,

    /**
     * Dead and live row versions of the jobs table, from the cumulative statistics (about a
     * second behind); its size in pages now, and as the last VACUUM or ANALYZE recorded it
     * (pg_class.relpages: when the cached plans were last invalidated). $1 the table, as text
     */
    jobsTableTuples: `
      SELECT s.n_dead_tup::float8 AS dead, s.n_live_tup::float8 AS live,
             (pg_relation_size(s.relid) / current_setting('block_size')::int)::float8 AS pages,
             c.relpages::float8 AS recorded_pages
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relid = $1::regclass`,

    /** Outside any transaction (VACUUM refuses one); SKIP_LOCKED: never wait on a lock for it. */
    vacuumJobs: `VACUUM (SKIP_LOCKED) ${jobs}`,

    /** New statistics, so every connection replans its cached statements on the jobs table (vacuum.ts says why). */
    analyzeJobs: `ANALYZE (SKIP_LOCKED) ${jobs}`,

    /**
     * Claims of a queue with globalConcurrency or a limiter run one at a time across all nodes,
     * under this transaction-scoped lock; each statement after it reads a fresh snapshot (READ
     * COMMITTED), so it counts the running jobs other nodes' claims just committed. $1 key
     */
    lockQueueClaims: `SELECT pg_advisory_xact_lock($1::bigint)`,

    /**
     * What the limits allow now: jobs of the queue running anywhere, starts within the rate
     * window, and how long until the oldest of those leaves it. $1 queue $2 window ms (NULL: none)
     * The window ends at now(), the transaction's start, which is what the claim stamps as the
     * jobs' started_at, and recordStarts records that too: so the limit holds for the start times
     * stored on the jobs. With clock_timestamp() here, a claim delayed between BEGIN and this
     * statement (a stalled event loop) let 8 jobs of a 4-per-second limit show started_at within
     * one second (test/integration/limits.int-spec.ts, a 40 ms stall on every other claim).
     */
    limitState: `
      WITH q AS (
        SELECT coalesce((SELECT recent_starts FROM ${s}.queues WHERE name = $1), '{}') AS starts
      ), win AS (
        SELECT t FROM q, unnest(q.starts) t WHERE $2::bigint IS NOT NULL AND t > now() - $2::bigint * interval '1 millisecond'
      )
      SELECT (SELECT count(*) FROM ${jobs} WHERE queue = $1 AND state = 'active')::int AS active,
             (SELECT count(*) FROM win)::int AS recent,
             (SELECT extract(epoch FROM min(t) + $2::bigint * interval '1 millisecond' - now()) * 1000 FROM win)::float8 AS next_free_ms`,

    /** Records $2 starts of a rate-limited queue, keeping the newest $4 within the window. $1 queue $3 window ms */
    recordStarts: `
      INSERT INTO ${s}.queues AS q (name, recent_starts) VALUES ($1, array_fill(now(), ARRAY[$2::int]))
      ON CONFLICT (name) DO UPDATE SET recent_starts = (
        SELECT coalesce(array_agg(t ORDER BY t), '{}') FROM (
          SELECT t FROM unnest(q.recent_starts || array_fill(now(), ARRAY[$2::int])) t
          WHERE t > now() - $3::bigint * interval '1 millisecond'
          ORDER BY t DESC LIMIT $4) newest)`,

    /**
     * One tick of a recurring job: moves the schedule's last_tick forward and, only if it did,
     * inserts the tick's job (run_at = the tick) in the same statement. Another node with the
     * same tick, or an older one, inserts nothing. $1 key $2 tick $3 queue $4 name $5 payload
     * $6 max attempts $7 backoff $8 timeout ms $9 priority $10 channel
     */
    enqueueTick: `
      WITH moved AS (
        INSERT INTO ${s}.cron_schedules AS c (key, last_tick) VALUES ($1, $2)
        ON CONFLICT (key) DO UPDATE SET last_tick = EXCLUDED.last_tick WHERE c.last_tick < EXCLUDED.last_tick
        RETURNING key
      ), ins AS (
        INSERT INTO ${jobs} (queue, name, payload, run_at, max_attempts, backoff, timeout_ms, priority)
        SELECT $3, $4, $5::jsonb, $2, $6, $7::jsonb, $8, $9 FROM moved WHERE ${DURABLE}
        RETURNING id
      ), wake AS (SELECT pg_notify($10, $3 || '|0') FROM ins)
      SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM wake)::int AS woken`,

    /** $1 key */
    lastTick: `SELECT last_tick FROM ${s}.cron_schedules WHERE key = $1`,

    /** Maintenance runs on one node at a time: this transaction-scoped lock elects it. $1 key */
    tryMaintenanceLock: `SELECT pg_try_advisory_xact_lock($1::bigint) AS locked`,

    /**
     * Per-queue figures for health probes and metrics, in one statement: the live table holds
     * only the backlog, and failed jobs are counted from a partial index. $1 queue or NULL (all)
     */
    counts: `
      WITH live AS (${liveCountsSql(jobs, '$1')}
      ), failed AS (
        SELECT queue, count(*) AS failed FROM ${history}
        WHERE state = 'failed' AND ($1::text IS NULL OR queue = $1) GROUP BY queue
      ), parents AS (${waitingChildrenSql(jobs, '$1')})
      SELECT coalesce(l.queue, f.queue, w.queue) AS queue, coalesce(l.waiting, 0)::int AS waiting,
             coalesce(l.delayed, 0)::int AS delayed, coalesce(l.active, 0)::int AS active,
             coalesce(l.stalled, 0)::int AS stalled, coalesce(f.failed, 0)::int AS failed,
             coalesce(w.waiting_children, 0)::int AS waiting_children, l.oldest_waiting_age_ms
      FROM live l FULL JOIN failed f ON f.queue = l.queue FULL JOIN parents w ON w.queue = coalesce(l.queue, f.queue)`,

    /** Live jobs by queue and unique key (pairs of arrays). $1 queue[] $2 key[] */
    liveByUniqueKey: `
      SELECT ${LIVE_COLS}, unique_key FROM ${jobs}
      WHERE (queue, unique_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,

    /** One job, live or finished. $1 id */
    getJob: `
      SELECT ${LIVE_COLS} FROM ${jobs} WHERE id = $1
      UNION ALL
      SELECT ${HISTORY_COLS} FROM ${history} WHERE id = $1`,
    /**
     * getJob for each history layout, visiting only the partitions that can hold the id: $1 id,
     * then (partitioned) the values of idLookup (history-by-id.ts).
     */
    getJobIn: byLayout((layout) =>
      layout === 'flat'
        ? `
      SELECT ${LIVE_COLS} FROM ${jobs} WHERE id = $1
      UNION ALL
      SELECT ${HISTORY_COLS} FROM ${history} WHERE id = $1`
        : `
      SELECT ${LIVE_COLS} FROM ${jobs} WHERE id = $1::bigint
      UNION ALL
      ${historyByIdParamSql(schema, HISTORY_COLS, layout)}`,
    ),

    /**
     * Tests only (nestjs-pg-queue/testing): waiting jobs due later (delayed, retry backoff,
     * snoozed) become due now, so the next claim takes them. $1 queue or NULL for all
     */
    makeDueWaiting: `
      UPDATE ${jobs} SET run_at = now()
      WHERE state = 'waiting' AND run_at > now() AND ($1::text IS NULL OR queue = $1)`,
  };
}

export type Queries = ReturnType<typeof buildQueries>;

/** One statement per history layout. */
export function byLayout(build: (layout: HistoryLayout) => string): Readonly<Record<HistoryLayout, string>> {
  return { flat: build('flat'), partitioned: build('partitioned'), 'partitioned-legacy': build('partitioned-legacy') };
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
  const from = `now() - $6::bigint * interval '1 millisecond'`;
  const cond =
    side === 'inside'
      ? `(priority, run_at) >= ($5::int, ${from}) AND run_at >= ${from}`
      : `(priority < $5::int OR run_at < ${from})`;
  return parts.join(`${CLAIM_DUE} AND ${cond}`);
}

/**
 * The one row a batch write answers (completeArchive, completeDelete): `n` rows written of the
 * `cardinality($1)` asked, and their ids only when some were not written (a lease was lost),
 * else NULL. `cte` names the CTE whose RETURNING id lists the rows written.
 */
function writtenRowSql(cte: string): string {
  return `SELECT count(*)::int AS n, CASE WHEN count(*) < cardinality($1::bigint[]) THEN coalesce(array_agg(id), '{}') END AS ids
      FROM ${cte}`;
}

/**
 * An enqueue on the queue's own pool commits durably whatever the server's or database's
 * `synchronous_commit` default (an app may run with it off for its own writes): this forces it on
 * for the statement's own transaction, in the same round trip (an InitPlan, evaluated once). An
 * enqueue in the caller's transaction never carries it: the caller owns that commit.
 */
export const DURABLE = `(SELECT set_config('synchronous_commit', 'on', true)) = 'on'`;

/**
 * The insert's per-job columns after the payload, in parameter order ($2 ...). The parameters
 * after them (unique key, channel) are numbered from this list's length, never written as
 * literals: a column added here moves them with it (test/unit/insert-params.spec.ts checks).
 */
export const INSERT_COLUMNS = [
  ['queue', 'text'],
  ['name', 'text'],
  ['priority', 'int'],
  ['run_at', 'timestamptz'],
  ['delay_ms', 'bigint'],
  ['max_attempts', 'int'],
  ['backoff', 'text'],
  ['timeout_ms', 'int'],
  ['trace', 'text'],
] as const;

/** A column of INSERT_COLUMNS. */
export type InsertColumn = (typeof INSERT_COLUMNS)[number][0];

/** The bind parameters of each insert, by position: what the store sends, and the SQL reads. */
export const INSERT_PARAMS = {
  /** The plain insert: $1 payload, then INSERT_COLUMNS, then the NOTIFY channel. */
  insert: { count: INSERT_COLUMNS.length + 2, channel: INSERT_COLUMNS.length + 2 },
  /** The unique insert: $1 payload, then INSERT_COLUMNS, then unique_key, then the channel. */
  unique: { count: INSERT_COLUMNS.length + 3, uniqueKey: INSERT_COLUMNS.length + 2, channel: INSERT_COLUMNS.length + 3 },
} as const;

/**
 * The bulk insert: one statement whatever the number of jobs, plus one NOTIFY per queue riding
 * in the caller's transaction, so it is delivered only on commit; its payload `queue|ms` says how
 * soon the earliest new job is due (0 = now). Payloads always travel together in $1; each
 * other column travels as an array only when its values differ within the call, else as one
 * scalar: parsing nine 1,000-element arrays cost about twice the insert itself (measured:
 * 23 ms vs 12 ms per 1,000 jobs). `arrays[i]` says whether INSERT_COLUMNS[i] is an array; the
 * arrays are zipped with the payloads by ROWS FROM, in input order.
 * `durable`: the insert runs on the queue's own pool, so it forces `synchronous_commit` on (DURABLE).
 *
 * `payloads`: how $1 carries them. `'jsonb'` (the usual case): one JSON array of every payload,
 * `[p1,p2,...]`, split by `jsonb_array_elements`. Against a `text[]` of JSON texts this spares
 * the client pg's quoting of every element into an array literal (0.14 ms per 1,000 small
 * payloads) and the server that literal's parse before each element's own: EXPLAIN ANALYZE of
 * 1,000 small jobs on PostgreSQL 15, median of 41, 3.24 ms with the whole statement as it is now
 * against 3.52 ms as it was (text[], and the wake-up grouped from every row). `'text[]'`: one
 * JSON text per job, each cast alone, for calls too long for one jsonb value (JobStore.insert
 * decides: JSONB_ARRAY_MAX_CHARS).
 * Every piece of this SQL is from the fixed vocabulary above; values are bind parameters.
 */
export function buildInsert(
  schema: string,
  arrays: readonly boolean[],
  durable: boolean,
  payloads: 'jsonb' | 'text[]' = 'jsonb',
): string {
  const from = [payloads === 'jsonb' ? 'jsonb_array_elements($1::jsonb)' : 'unnest($1::text[])'];
  const alias = ['payload'];
  const expr: Record<string, string> = {};
  INSERT_COLUMNS.forEach(([col, type], i) => {
    const p = `$${i + 2}`;
    if (arrays[i]) {
      from.push(`unnest(${p}::${type}[])`);
      alias.push(col);
      expr[col] = `t.${col}`;
    } else {
      expr[col] = `${p}::${type}`;
    }
  });
  const runAt = `coalesce(${expr.run_at}, now() + ${expr.delay_ms} * interval '1 millisecond')`;
  // One queue and one due time for the whole call (addBulk at its defaults, say): the wake-up
  // is worked out once from the parameters, not grouped from every inserted row (measured:
  // 0.1-0.2 ms less per 1,000 jobs, EXPLAIN ANALYZE on PostgreSQL 15).
  const oneWake = !arrays[0] && !arrays[3] && !arrays[4];
  const due = (at: string) => `greatest(0, ceil(extract(epoch FROM ${at} - now()) * 1000))::bigint`;
  const channel = `$${INSERT_PARAMS.insert.channel}`;
  return `
    WITH ins AS (
      INSERT INTO ${escapeIdentifier(schema)}.jobs (queue, name, payload, priority, run_at, max_attempts, backoff, timeout_ms, trace)
      SELECT ${expr.queue}, ${expr.name}, t.payload${payloads === 'jsonb' ? '' : '::jsonb'}, ${expr.priority},
             ${runAt}, ${expr.max_attempts}, ${expr.backoff}::jsonb, ${expr.timeout_ms}, ${expr.trace}::jsonb
      FROM ROWS FROM (${from.join(', ')}) AS t(${alias.join(', ')}) ${durable ? `WHERE ${DURABLE}` : ''}
      RETURNING ${oneWake ? 'id' : 'id, queue, run_at'}
    ), wake AS (${
      oneWake
        ? `
      SELECT pg_notify(${channel}, ${expr.queue} || '|' || ${due(runAt)})`
        : `
      SELECT pg_notify(${channel}, queue || '|' || ${due('min(run_at)')})
      FROM ins GROUP BY queue`
    }
    )
    -- One row back, whatever the count: decoding 1,000 rows of timestamps cost the producer more
    -- than the insert itself. Identity values are assigned in input order. The ids travel as the
    -- text of a bigint[], '{1,2,3}', which the client splits natively (pg would parse a bigint[]
    -- element by element in JavaScript, 0.1 ms per 1,000; string_agg cost the server more).
    SELECT array_agg(id ORDER BY id)::text AS ids, now() AS now, (SELECT count(*) FROM wake) AS woken
    FROM ins`;
}

/**
 * The insert for calls where some job has a `uniqueKey`: ON CONFLICT against the partial unique
 * index of live jobs. Keeps (DO NOTHING) or, with `replaceWaiting`, replaces a still-waiting job
 * of the same key (DO UPDATE ... WHERE state = 'waiting'; a running one is left alone). Returns
 * the rows it inserted or replaced as [id, unique_key, inserted] triples, `inserted` false for a
 * replaced one (`xmax = 0` only on a row version this statement inserted: an ON CONFLICT update
 * stamps its own transaction id there); jobs without a key come back in input order (identity
 * values follow the ORDER BY). Not the hot path: every column is an array.
 * $1 payload[], INSERT_COLUMNS[], unique_key[], channel (INSERT_PARAMS.unique)
 */
export function buildUniqueInsert(schema: string, replaceWaiting: boolean, durable: boolean): string {
  const { uniqueKey, channel } = INSERT_PARAMS.unique;
  const arrays = ['$1::text[]', ...INSERT_COLUMNS.map(([, type], i) => `$${i + 2}::${type}[]`), `$${uniqueKey}::text[]`];
  const names = ['payload', ...INSERT_COLUMNS.map(([col]) => col), 'unique_key'];
  const conflict = replaceWaiting
    ? `DO UPDATE SET payload = EXCLUDED.payload, priority = EXCLUDED.priority, run_at = EXCLUDED.run_at,
         max_attempts = EXCLUDED.max_attempts, backoff = EXCLUDED.backoff, timeout_ms = EXCLUDED.timeout_ms,
         trace = EXCLUDED.trace
       WHERE j.state = 'waiting'`
    : 'DO NOTHING';
  return `
    WITH input AS (
      SELECT * FROM unnest(${arrays.join(', ')}) WITH ORDINALITY AS t(${names.join(', ')}, ord)
    ), ins AS (
      INSERT INTO ${escapeIdentifier(schema)}.jobs AS j (queue, name, payload, priority, run_at, max_attempts, backoff, timeout_ms, trace, unique_key)
      SELECT queue, name, payload::jsonb, priority, coalesce(run_at, now() + delay_ms * interval '1 millisecond'),
             max_attempts, backoff::jsonb, timeout_ms, trace::jsonb, unique_key
      FROM input ${durable ? `WHERE ${DURABLE}` : ''} ORDER BY ord
      ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL ${conflict}
      RETURNING j.id, j.queue, j.unique_key, j.run_at, j.xmax = 0 AS inserted
    ), wake AS (
      SELECT pg_notify($${channel}, queue || '|' ||
               greatest(0, ceil(extract(epoch FROM min(run_at) - now()) * 1000))::bigint)
      FROM ins GROUP BY queue
    )
    SELECT coalesce(json_agg(json_build_array(id::text, unique_key, inserted) ORDER BY id), '[]') AS rows, now() AS now,
           (SELECT count(*) FROM wake) AS woken
    FROM ins`;
}
