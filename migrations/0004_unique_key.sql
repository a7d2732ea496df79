-- nestjs-pg-queue schema, version 4: unique keys.
-- At most one live job (waiting or active) per queue and key. Finished jobs leave this table,
-- so a key is free again the moment its job completes, fails or is cancelled. The column is
-- catalog-only; the index is built over the live table, which holds only the backlog.
ALTER TABLE jobs ADD COLUMN unique_key text;
CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (queue, unique_key) WHERE unique_key IS NOT NULL;
