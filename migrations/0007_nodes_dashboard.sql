-- nestjs-pg-queue schema, version 7: the nodes registry and the dashboard's reads.
-- Catalog-only column additions and a new table; the indexes on job_history are built once over
-- the existing history (a one-time cost at upgrade, proportional to the history kept).

-- One row per live worker process, upserted by its heartbeat (every heartbeat_ms), deleted on
-- clean shutdown, pruned by the maintenance pass once not seen for 10 heartbeats. A node counts
-- as live while last_seen_at > now() - 3 * heartbeat_ms. id is the worker id in locked_by.
CREATE TABLE nodes (
  id            text        PRIMARY KEY,
  host          text        NOT NULL,
  pid           integer     NOT NULL,
  started_at    timestamptz NOT NULL,
  last_seen_at  timestamptz NOT NULL DEFAULT now(),
  heartbeat_ms  integer     NOT NULL,
  queues        jsonb       NOT NULL DEFAULT '[]'
);

-- The worker of the final attempt, so the job page can say which node ran it (errors of earlier
-- attempts carry their own `worker`).
ALTER TABLE job_history ADD COLUMN locked_by text;

-- The dashboard lists a queue's finished jobs of one state newest first, by keyset on id
-- (WHERE queue = $1 AND state = $2 AND id < $cursor ORDER BY id DESC LIMIT n): this index
-- answers it in n index entries however large the history. It also bounds retry-failed by name.
CREATE INDEX job_history_queue_state_idx ON job_history (queue, state, id);

-- Counting cancelled jobs per queue for the overview, like job_history_failed_idx for failed:
-- without it that count would walk every completed row of the index above.
CREATE INDEX job_history_cancelled_idx ON job_history (queue) WHERE state = 'cancelled';
