-- nestjs-pg-queue schema, version 3: cancellation and pause.
-- Every change here is catalog-only or creates a new table: no rewrite, no scan of history.

-- Cancelling a running job sets this; the heartbeat of the node that runs it reads it, so a
-- cancel reaches the handler even when the NOTIFY that hurries it is missed.
ALTER TABLE jobs ADD COLUMN cancel_requested_at timestamptz;

-- A third way to finish. NOT VALID: every existing row satisfies it (it only widens the old
-- check), so nothing scans a history that may hold millions of rows.
ALTER TABLE job_history DROP CONSTRAINT job_history_state_check;
ALTER TABLE job_history ADD CONSTRAINT job_history_state_check
  CHECK (state IN ('completed', 'failed', 'cancelled')) NOT VALID;

-- Per-queue state every node obeys; the claim reads it. A queue with no row is not paused.
CREATE TABLE queues (
  name        text        PRIMARY KEY,
  paused      boolean     NOT NULL DEFAULT false,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
