-- nestjs-pg-queue schema, version 16: the flow trigger publishes what it does on the events
-- channel (lib/db/events.ts; docs/events.md). Only the function of migration 8 is replaced
-- (CREATE OR REPLACE: no lock on jobs, no row rewritten; the trigger keeps calling it).
--
-- Two transitions happen in this trigger, not in an outcome statement, so until now no listener
-- heard them and a wait for a parent failed by its child learned of it from its 5 s re-read:
-- - a parent's last dependency ended: waiting-children -> waiting, published as
--   `released|queue|id.attempt` (BullMQ's QueueEvents says `waiting` with prev
--   'waiting-children'; here `waiting` would suggest every add, which publishes nothing);
-- - a child with onFailure 'fail-parent' ended not completed: the parent fails without running,
--   published as `failed|queue|id.attempt`, like any failure for good.
-- The same `kind|queue|id.attempt` payload the outcome statements send (one entry: a bigint, an
-- attempt and a queue name of at most 100 characters, far under NOTIFY's 8000), on `<schema>_events`,
-- beside the wake-up the trigger already sent on `<schema>_jobs`. pg_notify in this trigger is
-- delivered when the transaction that finished the child commits, never if it rolls back.
-- The trigger publishes whatever `events.publish` says (it cannot see the option): one
-- notification per released or failed parent, which is rare beside the outcomes themselves.
-- A listener confirms each hint from the rows before it fires (lib/worker/event-confirm.ts).
CREATE OR REPLACE FUNCTION job_left_live_table() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  outcome text;
  err jsonb;
  p record;
  r_queue text;
  r_run_at timestamptz;
  r_state text;
  r_attempt integer;
  f_queue text;
  f_attempt integer;
BEGIN
  IF OLD.has_dependencies THEN
    UPDATE job_dependencies SET parent_finished_at = pg_catalog.now() WHERE parent_id = OLD.id AND parent_finished_at IS NULL;
  END IF;
  IF NOT OLD.has_dependents THEN
    RETURN NULL;
  END IF;
  -- The row this statement wrote has finished_at = now() (every finishing statement writes that):
  -- the bound lets a history partitioned by finish time (migration 10) skip its older partitions.
  SELECT h.state INTO outcome FROM job_history h WHERE h.id = OLD.id AND h.finished_at >= pg_catalog.now();
  IF outcome IS NULL THEN
    -- No history row: completed with retention.completedMs = 0, or removed (queue.remove() names
    -- the id it removes in this transaction-local setting).
    outcome := CASE WHEN pg_catalog.current_setting('pgqueue.removing_job', true) = OLD.id::text THEN 'removed' ELSE 'completed' END;
  END IF;
  PERFORM 1 FROM jobs WHERE id IN (
    SELECT parent_id FROM job_dependencies WHERE child_id = OLD.id AND state IS NULL
  ) ORDER BY id FOR UPDATE;
  FOR p IN
    UPDATE job_dependencies SET state = outcome, resolved_at = pg_catalog.now()
    WHERE child_id = OLD.id AND state IS NULL
    RETURNING parent_id, on_failure
  LOOP
    IF outcome <> 'completed' AND p.on_failure = 'fail-parent' THEN
      err := pg_catalog.jsonb_build_object('name', 'ChildFailedError', 'at', pg_catalog.now(), 'childId', OLD.id::text,
        'message', 'Child job ' || OLD.id || ' (' || OLD.queue || '/' || OLD.name || ') ended ' || outcome ||
        ', so this parent fails without running (the child''s onFailure is ''fail-parent''). Retry the child, then this job, or give the child onFailure: ''ignore''.');
      f_queue := NULL;
      WITH gone AS (
        DELETE FROM jobs WHERE id = p.parent_id AND state = 'waiting-children' RETURNING *
      )
      INSERT INTO job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
        backoff, timeout_ms, errors, result, created_at, started_at, finished_at, locked_by, progress, trace)
      SELECT id, queue, name, payload, 'failed', priority, run_at, attempt, max_attempts, backoff, timeout_ms,
             errors || pg_catalog.jsonb_build_array(err || pg_catalog.jsonb_build_object('attempt', attempt)), NULL, created_at,
             started_at, pg_catalog.now(), locked_by, progress, trace
      FROM gone
      RETURNING queue, attempt INTO f_queue, f_attempt;
      IF f_queue IS NOT NULL THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA || '_events', 'failed|' || f_queue || '|' || p.parent_id::text || '.' || f_attempt::text);
      END IF;
    ELSE
      -- The last child: the parent becomes claimable, its queue's workers are woken and its
      -- release is published (both NOTIFYs are delivered when this transaction commits).
      r_state := NULL;
      UPDATE jobs SET pending_dependencies = pending_dependencies - 1,
             state = CASE WHEN pending_dependencies <= 1 THEN 'waiting' ELSE state END
      WHERE id = p.parent_id AND state = 'waiting-children'
      RETURNING queue, run_at, state, attempt INTO r_queue, r_run_at, r_state, r_attempt;
      IF r_state = 'waiting' THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA || '_jobs',
          r_queue || '|' || greatest(0, pg_catalog.ceil(extract(epoch FROM r_run_at - pg_catalog.now()) * 1000))::bigint);
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA || '_events', 'released|' || r_queue || '|' || p.parent_id::text || '.' || r_attempt::text);
      END IF;
    END IF;
  END LOOP;
  RETURN NULL;
END
$fn$;
