-- nestjs-pg-queue schema, version 17: a group key per job (issue 29: per-tenant concurrency, fair
-- turns and per-group rate limits in one queue). NULL on every job added without a group.
-- Catalog-only on both tables and on every history partition (a nullable column without a
-- default rewrites no row); partitions created later copy the parent (LIKE job_history).
-- The claim's indexes and the per-group settings table join this file with the grouped claim
-- (lib/db/claim-grouped.ts).
ALTER TABLE jobs ADD COLUMN group_key text;
ALTER TABLE job_history ADD COLUMN group_key text;

-- The grouped claim (claim_grouped below) finds the groups with waiting jobs by a loose index
-- scan (one probe per group, from the worker's cursor on), takes a group's jobs in the queue's
-- order, and counts a group's running jobs: three partial indexes that hold grouped jobs only,
-- so a queue whose jobs have no group pays nothing for them (not on insert, not on claim).
CREATE INDEX jobs_group_claim_idx ON jobs (queue, group_key, priority, run_at, id)
  WHERE state = 'waiting' AND group_key IS NOT NULL;
-- order: 'fifo': a group's next job is its oldest (by id), due or not.
CREATE INDEX jobs_group_fifo_idx ON jobs (queue, group_key, id) WHERE state = 'waiting' AND group_key IS NOT NULL;
CREATE INDEX jobs_group_active_idx ON jobs (queue, group_key) WHERE state = 'active' AND group_key IS NOT NULL;

-- A group's stored settings and rate window: `concurrency` set by queue.setGroupConcurrency
-- (NULL: the queue's group.concurrency applies), `recent_starts` the starts of a group of a
-- queue with group.limiter within its window (newest `max` kept). Read and written by the claim
-- under the group's advisory lock. A row holds no job: deleting one strands nothing (the claim
-- finds groups from the jobs themselves).
CREATE TABLE job_groups (
  queue         text NOT NULL,
  group_key     text NOT NULL,
  concurrency   int CONSTRAINT job_groups_concurrency_positive CHECK (concurrency IS NULL OR concurrency > 0),
  recent_starts timestamptz[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (queue, group_key)
);

-- The claim of a grouped queue, in one round trip (lib/db/claim-grouped.ts explains the rule).
-- VOLATILE plpgsql: every statement below reads a fresh snapshot (READ COMMITTED), so a group's
-- running jobs are counted after its lock is taken, and the count sees what the previous holder
-- of that lock committed. Per-group pg_try_advisory_xact_lock: a group another node is claiming
-- is skipped, never waited for, so unrelated groups never wait on each other. Groups without a
-- limit (no concurrency, no limiter, no FIFO, no stored override) take no lock at all.
--   p_cursor      the last group this worker visited (NULL: from the first)
--   p_concurrency registerQueue group.concurrency (NULL: none); an override in job_groups wins
--   p_fifo        order 'fifo': one running job per group, the oldest next, a not-yet-due head blocks
--   p_rate_max, p_rate_ms  group.limiter (NULL: none)
--   p_max_groups  groups visited at most (each holds a lock slot until commit)
--   p_ungrouped   this claim also gives jobs without a group a turn (one more "group", no limits)
-- Returns the claimed rows, each with the cursor to send next time; one row with a NULL job when
-- nothing was claimed.
CREATE FUNCTION claim_grouped(p_queue text, p_limit int, p_worker text, p_lease_ms float8, p_cursor text,
    p_concurrency int, p_fifo boolean, p_rate_max int, p_rate_ms bigint, p_max_groups int, p_ungrouped boolean)
  RETURNS TABLE (next_cursor text, job jobs)
  LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
  limited boolean := p_fifo OR p_concurrency IS NOT NULL OR p_rate_max IS NOT NULL;
  lock_prefix text := 'nestjs-pg-queue:group:' || pg_catalog.current_schema() || ':' || p_queue || ':';
  groups text[] := '{}';
  caps int[] := '{}';
  got int[] := '{}';
  ids bigint[] := '{}';
  took bigint[];
  g text;
  cur text := p_cursor;
  wrapped boolean := false;
  stored int;
  starts timestamptz[];
  conc int;
  cap int;
  open_slots int := 0;
  remaining int := p_limit;
  share int;
  progressed boolean;
  i int;
  ts timestamptz;
BEGIN
  IF EXISTS (SELECT 1 FROM queues q WHERE q.name = p_queue AND q.paused) THEN
    RETURN QUERY SELECT p_cursor, NULL::jobs;
    RETURN;
  END IF;
  -- Phase A: the groups whose turn it is, from the cursor on (wrapping once), each with how many
  -- jobs its limits let start now. Stops once as many groups can start a job as there are slots.
  WHILE pg_catalog.cardinality(groups) < p_max_groups AND open_slots < p_limit LOOP
    g := NULL;
    IF cur IS NOT NULL THEN
      SELECT j.group_key INTO g FROM jobs j
      WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key IS NOT NULL AND j.group_key > cur
      ORDER BY j.group_key LIMIT 1;
    END IF;
    IF g IS NULL THEN
      EXIT WHEN wrapped;
      wrapped := true;
      SELECT j.group_key INTO g FROM jobs j
      WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key IS NOT NULL
      ORDER BY j.group_key LIMIT 1;
    END IF;
    EXIT WHEN g IS NULL OR g = ANY(groups);
    cur := g;
    cap := NULL;
    IF limited THEN
      CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(lock_prefix || g, 0));
    END IF;
    stored := NULL;
    starts := NULL;
    SELECT s.concurrency, s.recent_starts INTO stored, starts FROM job_groups s WHERE s.queue = p_queue AND s.group_key = g;
    IF NOT limited AND stored IS NOT NULL THEN
      CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(lock_prefix || g, 0));
    END IF;
    conc := CASE WHEN p_fifo THEN 1 ELSE coalesce(stored, p_concurrency) END;
    IF conc IS NOT NULL THEN
      cap := conc - (SELECT pg_catalog.count(*) FROM jobs j WHERE j.queue = p_queue AND j.group_key = g AND j.state = 'active')::int;
    END IF;
    IF p_rate_max IS NOT NULL THEN
      cap := least(coalesce(cap, p_rate_max), p_rate_max - (SELECT pg_catalog.count(*) FROM pg_catalog.unnest(starts) t
        WHERE t > pg_catalog.clock_timestamp() - p_rate_ms::float8 * interval '1 millisecond')::int);
    END IF;
    cap := coalesce(cap, p_limit);
    groups := groups || g;
    caps := caps || cap;
    got := got || 0;
    IF cap > 0 THEN
      open_slots := open_slots + 1;
    END IF;
  END LOOP;
  -- Jobs without a group, on their turn: one more group with no limits.
  IF p_ungrouped THEN
    share := pg_catalog.ceil(p_limit::numeric / (open_slots + 1))::int;
    SELECT coalesce(pg_catalog.array_agg(x.id), '{}') INTO took FROM (
      SELECT j.id FROM jobs j
      WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key IS NULL AND j.run_at <= pg_catalog.now()
      ORDER BY j.priority, j.run_at, j.id LIMIT share FOR UPDATE SKIP LOCKED) x;
    ids := ids || took;
    remaining := remaining - pg_catalog.cardinality(took);
  END IF;
  -- Phase B: equal shares of the slots left, in turn, while a group that filled its share may
  -- have more (a group with fewer due jobs than its share leaves the rest to the others).
  LOOP
    EXIT WHEN remaining <= 0;
    open_slots := 0;
    FOR i IN 1 .. pg_catalog.cardinality(groups) LOOP
      IF caps[i] > got[i] THEN
        open_slots := open_slots + 1;
      END IF;
    END LOOP;
    EXIT WHEN open_slots = 0;
    share := pg_catalog.ceil(remaining::numeric / open_slots)::int;
    progressed := false;
    FOR i IN 1 .. pg_catalog.cardinality(groups) LOOP
      CONTINUE WHEN caps[i] <= got[i] OR remaining <= 0;
      cap := least(share, caps[i] - got[i], remaining);
      IF p_fifo THEN
        SELECT coalesce(pg_catalog.array_agg(x.id), '{}') INTO took FROM (
          SELECT j.id FROM jobs j
          WHERE j.id = (SELECT h.id FROM jobs h WHERE h.queue = p_queue AND h.group_key = groups[i] AND h.state = 'waiting'
                        ORDER BY h.id LIMIT 1)
            AND j.state = 'waiting' AND j.run_at <= pg_catalog.now()
          FOR UPDATE SKIP LOCKED) x;
      ELSE
        SELECT coalesce(pg_catalog.array_agg(x.id), '{}') INTO took FROM (
          SELECT j.id FROM jobs j
          WHERE j.queue = p_queue AND j.group_key = groups[i] AND j.state = 'waiting' AND j.run_at <= pg_catalog.now()
            AND j.id <> ALL(ids)
          ORDER BY j.priority, j.run_at, j.id LIMIT cap FOR UPDATE SKIP LOCKED) x;
      END IF;
      IF pg_catalog.cardinality(took) < cap THEN
        caps[i] := got[i] + pg_catalog.cardinality(took);
      END IF;
      IF pg_catalog.cardinality(took) > 0 THEN
        progressed := true;
        got[i] := got[i] + pg_catalog.cardinality(took);
        ids := ids || took;
        remaining := remaining - pg_catalog.cardinality(took);
      END IF;
    END LOOP;
    EXIT WHEN NOT progressed;
  END LOOP;
  -- The jobs' start: the clock now, after every group's lock and count, not the transaction's
  -- start (now()). A job of the group that finished while this claim walked its groups has a
  -- finished_at (its transaction's now()) before this, so the started_at and finished_at stored
  -- in history show the limits as the claim kept them. The rate windows record the same instant.
  ts := pg_catalog.clock_timestamp();
  -- The rate windows of the groups that started jobs (under their locks, still held).
  IF p_rate_max IS NOT NULL THEN
    FOR i IN 1 .. pg_catalog.cardinality(groups) LOOP
      CONTINUE WHEN got[i] = 0;
      INSERT INTO job_groups AS s (queue, group_key, recent_starts)
      VALUES (p_queue, groups[i], pg_catalog.array_fill(ts, ARRAY[got[i]]))
      ON CONFLICT (queue, group_key) DO UPDATE SET recent_starts = (
        SELECT coalesce(pg_catalog.array_agg(t ORDER BY t), '{}') FROM (
          SELECT t FROM pg_catalog.unnest(pg_catalog.array_cat(s.recent_starts, pg_catalog.array_fill(ts, ARRAY[got[i]]))) t
          WHERE t > ts - p_rate_ms::float8 * interval '1 millisecond'
          ORDER BY t DESC LIMIT p_rate_max) newest);
    END LOOP;
  END IF;
  IF pg_catalog.cardinality(ids) = 0 THEN
    RETURN QUERY SELECT cur, NULL::jobs;
    RETURN;
  END IF;
  RETURN QUERY
    UPDATE jobs j
    SET state = 'active', attempt = least(j.attempt, 2147483646) + 1, locked_by = p_worker,
        locked_until = ts + p_lease_ms * interval '1 millisecond', started_at = ts
    WHERE j.id = ANY(ids)
    RETURNING cur, j;
END
$fn$;

-- The flow trigger of migrations 8 and 16, replaced only to carry group_key into history when a
-- child's failure fails its parent (the one history insert that is not in lib/db). Unchanged
-- otherwise (CREATE OR REPLACE: no lock on jobs, the trigger keeps calling it).
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
        backoff, timeout_ms, errors, result, created_at, started_at, finished_at, locked_by, progress, trace, group_key)
      SELECT id, queue, name, payload, 'failed', priority, run_at, attempt, max_attempts, backoff, timeout_ms,
             errors || pg_catalog.jsonb_build_array(err || pg_catalog.jsonb_build_object('attempt', attempt)), NULL, created_at,
             started_at, pg_catalog.now(), locked_by, progress, trace, group_key
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
