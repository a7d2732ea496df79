-- nestjs-pg-queue schema, version 5: global concurrency and rate limits.

-- The starts of a rate-limited queue within its window, oldest first (at most `limiter.max`):
-- a job may start when fewer than max started in the last durationMs, on any node.
ALTER TABLE queues ADD COLUMN recent_starts timestamptz[] NOT NULL DEFAULT '{}';

-- Counting a queue's running jobs (globalConcurrency) reads this instead of the table; the
-- rescuer's scan of expired leases reads it too. It replaces the lease index: active rows are
-- as many as the jobs running right now, so a scan of all of them stays small.
DROP INDEX jobs_lease_idx;
CREATE INDEX jobs_active_idx ON jobs (queue, locked_until) WHERE state = 'active';
