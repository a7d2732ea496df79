-- nestjs-pg-queue schema, version 1.
-- Runs with search_path set to the queue's schema (the migrator does that; by hand:
-- `SET search_path TO pgqueue;` first), so no table name below is schema-qualified.

-- Live jobs only: waiting (including delayed) and active. Finished jobs move to job_history in
-- the statement that finishes them, so this table, and the index the claim reads, stay as small
-- as the backlog however long the history grows.
CREATE TABLE jobs (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue         text        NOT NULL,
  name          text        NOT NULL,
  payload       jsonb       NOT NULL,
  state         text        NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'active')),
  priority      integer     NOT NULL DEFAULT 0,
  run_at        timestamptz NOT NULL DEFAULT now(),
  attempt       integer     NOT NULL DEFAULT 0,
  max_attempts  integer     NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  backoff       jsonb,
  timeout_ms    integer,
  errors        jsonb       NOT NULL DEFAULT '[]',
  locked_by     text,
  locked_until  timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  started_at    timestamptz
) WITH (
  -- Every job is inserted, updated at least once and deleted: vacuum this table early and
  -- without throttling, and leave room on each page for HOT updates.
  fillfactor = 80,
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_threshold = 500,
  autovacuum_vacuum_insert_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.05,
  autovacuum_vacuum_cost_delay = 0
);

-- The claim: WHERE state = 'waiting' AND queue = $1 AND run_at <= now()
-- ORDER BY priority, run_at, id. The index holds waiting rows only.
CREATE INDEX jobs_claim_idx ON jobs (queue, priority, run_at, id) WHERE state = 'waiting';

-- The rescuer: active jobs whose lease ran out.
CREATE INDEX jobs_lease_idx ON jobs (locked_until) WHERE state = 'active';

-- Finished jobs: completed (kept for the retention period) and failed (kept until removed).
CREATE TABLE job_history (
  id            bigint      PRIMARY KEY,
  queue         text        NOT NULL,
  name          text        NOT NULL,
  payload       jsonb       NOT NULL,
  state         text        NOT NULL CHECK (state IN ('completed', 'failed')),
  priority      integer     NOT NULL,
  run_at        timestamptz NOT NULL,
  attempt       integer     NOT NULL,
  max_attempts  integer     NOT NULL,
  backoff       jsonb,
  timeout_ms    integer,
  errors        jsonb       NOT NULL,
  result        jsonb,
  created_at    timestamptz NOT NULL,
  started_at    timestamptz,
  finished_at   timestamptz NOT NULL DEFAULT now()
) WITH (autovacuum_vacuum_insert_scale_factor = 0.05);

CREATE INDEX job_history_retention_idx ON job_history (state, finished_at);
