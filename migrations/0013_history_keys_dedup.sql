-- nestjs-pg-queue schema, version 13: finished jobs keep their unique key, and deduplication
-- with a window (BullMQ's throttle mode).
--
-- 1. job_history.unique_key: the key a job was added with, kept when it finishes, so getJob and
--    getJobs show it for finished jobs too. Catalog-only on every partition (a nullable column
--    without a default writes no row). It is NOT indexed and blocks nothing: the uniqueness of a
--    key stays over live jobs only (jobs_unique_key_idx, migration 4), so a finished job gives
--    its key up. The trigger of migration 8 that fails a parent for its child keeps writing no
--    key: a job with dependencies never has one (add() refuses dependsOn with uniqueKey, and a
--    flow takes no unique keys). Partitions created later copy the parent (LIKE job_history).
-- 2. job_dedup: one row per queue and deduplication key, naming the job that holds the key until
--    expires_at (the first add's time plus its ttlMs), whether that job is still live or has
--    finished. An add claims the key with INSERT ... ON CONFLICT DO UPDATE ... WHERE the holder
--    expired (or is gone from both tables), so concurrent adds on any number of nodes serialise
--    on the key's row: exactly one inserts a job, the others get its id. The claim commits or
--    rolls back with the add's transaction (the caller's, with { manager } or { client }).
--    lib/db/dedup.ts writes and reads it; the maintenance pass deletes expired rows in batches
--    on job_dedup_expires_idx (lib/db/maintenance.ts), never the add's path.

ALTER TABLE job_history ADD COLUMN unique_key text;

CREATE TABLE job_dedup (
  queue       text        NOT NULL,
  key         text        NOT NULL,
  job_id      bigint      NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (queue, key)
) WITH (
  -- Every row is inserted, maybe updated once, then deleted: vacuum early, as the jobs table.
  autovacuum_vacuum_scale_factor = 0.05,
  autovacuum_vacuum_insert_scale_factor = 0.05
);

CREATE INDEX job_dedup_expires_idx ON job_dedup (expires_at);
