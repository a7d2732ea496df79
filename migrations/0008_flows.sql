-- nestjs-pg-queue schema, version 8: flows and dependencies (a parent job runs once its
-- children have finished). Safe on a live install: the column additions are catalog-only (a
-- constant default is stored once, not written into every row, PostgreSQL 11+); the state check
-- is replaced NOT VALID (it only widens the old one, so no row is scanned); the new table is
-- empty. The one index on jobs is built over the live table, which holds only the backlog
-- (a SHARE lock on jobs for that build, as 0004 took: enqueues wait for it, claims do not).

-- A job whose dependencies have not all finished: not 'waiting', so jobs_claim_idx (WHERE state
-- = 'waiting') never holds it and the claim of jobs without dependencies is unchanged.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN ('waiting', 'active', 'waiting-children')) NOT VALID;

-- How many of its dependencies are not finished yet; it becomes 'waiting' at 0.
ALTER TABLE jobs ADD COLUMN pending_dependencies integer NOT NULL DEFAULT 0;
-- Some job waits on this one: its final transition (leaving this table) releases them. False on
-- every job without dependents, so the trigger below never runs for them (its WHEN is checked
-- on the row the DELETE already holds).
ALTER TABLE jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;
-- This job waits (or waited) on others: its edges are kept until it is finished and pruned.
ALTER TABLE jobs ADD COLUMN has_dependencies boolean NOT NULL DEFAULT false;

-- One row per edge: parent_id runs after child_id has finished. A tree (addFlow) and a DAG
-- (add(..., { dependsOn })) are the same thing here. state: NULL while the child is live, then
-- how it ended, set exactly once (the guard that makes a re-run or rescued child release its
-- parent at most once).
CREATE TABLE job_dependencies (
  child_id            bigint      NOT NULL,
  parent_id           bigint      NOT NULL,
  on_failure          text        NOT NULL DEFAULT 'fail-parent' CHECK (on_failure IN ('fail-parent', 'ignore')),
  state               text        CHECK (state IN ('completed', 'failed', 'cancelled', 'removed')),
  resolved_at         timestamptz,
  parent_finished_at  timestamptz,
  PRIMARY KEY (child_id, parent_id)
);
-- A parent's children (childResults, getJob, the dashboard's job page), by id.
CREATE INDEX job_dependencies_parent_idx ON job_dependencies (parent_id, child_id);
-- Maintenance deletes the edges of parents finished longer ago than the longest retention.
CREATE INDEX job_dependencies_finished_idx ON job_dependencies (parent_finished_at) WHERE parent_finished_at IS NOT NULL;

-- Counting jobs that wait on children per queue (getCounts, the overview), and the dashboard's
-- list of them: a partial index that holds only those rows.
CREATE INDEX jobs_waiting_children_idx ON jobs (queue, id) WHERE state = 'waiting-children';

-- lib/db/flow-insert.ts inserts the flows and edges this trigger resolves (lib/db/flows.ts reads them).
-- A job with dependents left the jobs table: its final transition (completed, failed, cancelled,
-- or removed). Runs in the statement (and so the transaction) that finished the child, at its
-- end, when the history row that statement wrote is visible: no crash between the child's
-- completion and its parent's release can strand the parent. Each edge is resolved once (state
-- IS NULL guard); parents are locked in id order, so two batches releasing the same parents
-- cannot deadlock. A parent failed by its child is itself deleted here, which fires this trigger
-- again for its own parents: failure propagates up a tree of any depth in the same transaction.
-- search_path is fixed at creation (the migrator sets it to the queue's schema), so the names
-- below resolve to this schema whatever the caller's path.
CREATE FUNCTION job_left_live_table() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  outcome text;
  err jsonb;
  p record;
  r_queue text;
  r_run_at timestamptz;
  r_state text;
BEGIN
  IF OLD.has_dependencies THEN
    UPDATE job_dependencies SET parent_finished_at = now() WHERE parent_id = OLD.id AND parent_finished_at IS NULL;
  END IF;
  IF NOT OLD.has_dependents THEN
    RETURN NULL;
  END IF;
  -- The row this statement wrote has finished_at = now() (every finishing statement writes that):
  -- the bound lets a history partitioned by finish time (migration 10) skip its older partitions.
  SELECT h.state INTO outcome FROM job_history h WHERE h.id = OLD.id AND h.finished_at >= now();
  IF outcome IS NULL THEN
    -- No history row: completed with retention.completedMs = 0, or removed (queue.remove() names
    -- the id it removes in this transaction-local setting).
    outcome := CASE WHEN current_setting('pgqueue.removing_job', true) = OLD.id::text THEN 'removed' ELSE 'completed' END;
  END IF;
  PERFORM 1 FROM jobs WHERE id IN (
    SELECT parent_id FROM job_dependencies WHERE child_id = OLD.id AND state IS NULL
  ) ORDER BY id FOR UPDATE;
  FOR p IN
    UPDATE job_dependencies SET state = outcome, resolved_at = now()
    WHERE child_id = OLD.id AND state IS NULL
    RETURNING parent_id, on_failure
  LOOP
    IF outcome <> 'completed' AND p.on_failure = 'fail-parent' THEN
      err := jsonb_build_object('name', 'ChildFailedError', 'at', now(), 'childId', OLD.id::text,
        'message', 'Child job ' || OLD.id || ' (' || OLD.queue || '/' || OLD.name || ') ended ' || outcome ||
        ', so this parent fails without running (the child''s onFailure is ''fail-parent''). Retry the child, then this job, or give the child onFailure: ''ignore''.');
      WITH gone AS (
        DELETE FROM jobs WHERE id = p.parent_id AND state = 'waiting-children' RETURNING *
      )
      -- progress and trace are added by migration 9; a function body is resolved when it runs,
      -- and the library runs only on a schema migrated to its latest version.
      INSERT INTO job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
        backoff, timeout_ms, errors, result, created_at, started_at, finished_at, locked_by, progress, trace)
      SELECT id, queue, name, payload, 'failed', priority, run_at, attempt, max_attempts, backoff, timeout_ms,
             errors || jsonb_build_array(err || jsonb_build_object('attempt', attempt)), NULL, created_at,
             started_at, now(), locked_by, progress, trace
      FROM gone;
    ELSE
      -- The last child: the parent becomes claimable, and its queue's workers are woken (the
      -- NOTIFY is delivered when this transaction commits, like an enqueue's).
      UPDATE jobs SET pending_dependencies = pending_dependencies - 1,
             state = CASE WHEN pending_dependencies <= 1 THEN 'waiting' ELSE state END
      WHERE id = p.parent_id AND state = 'waiting-children'
      RETURNING queue, run_at, state INTO r_queue, r_run_at, r_state;
      IF r_state = 'waiting' THEN
        PERFORM pg_notify(TG_TABLE_SCHEMA || '_jobs',
          r_queue || '|' || greatest(0, ceil(extract(epoch FROM r_run_at - now()) * 1000))::bigint);
      END IF;
    END IF;
  END LOOP;
  RETURN NULL;
END
$fn$;

CREATE TRIGGER jobs_release_dependents AFTER DELETE ON jobs
  FOR EACH ROW WHEN (OLD.has_dependents OR OLD.has_dependencies)
  EXECUTE FUNCTION job_left_live_table();
