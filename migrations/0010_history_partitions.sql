-- nestjs-pg-queue schema, version 10: job_history becomes a partitioned table, so retention can
-- drop whole partitions instead of deleting rows in batches (WAL, dead tuples and vacuum twice
-- over per finished job).
--
-- The layout, once complete:
--   job_history                    PARTITION BY RANGE (finished_at)
--     job_history_legacy           [MINVALUE, T0): the history as it was before this version (only
--                                  on an install that had one); pruned in batches as before
--     job_history_current          [T0 or MINVALUE, MAXVALUE) PARTITION BY LIST (state)
--       job_history_failed         'failed': kept until retried or removed (or retention.failedMs),
--                                  so no partition drop can take a failed job with it
--       job_history_done           'completed', 'cancelled' PARTITION BY RANGE (finished_at)
--         job_history_pYYYYMMDDTHH one per historyPartitionMs, created ahead by the maintenance
--                                  pass (lib/db/history/partitions.ts), dropped past retention
--         job_history_done_default whatever no partition covers (maintenance lapsed): no row can
--                                  fail to insert because its partition is missing
--
-- Everything here is catalog-only, whatever the size of the history: the old table is renamed
-- and attached as a partition over the whole range (FROM MINVALUE TO MAXVALUE), whose partition
-- constraint, finished_at IS NOT NULL, its NOT NULL column already proves, so ATTACH scans
-- nothing (measured: 0.3 ms with 1,000,000 rows; test/integration/history-migration.int-spec.ts
-- checks that this step reads no row). Its indexes are attached to the parent's equivalents,
-- not rebuilt. The exclusive lock of the rename lasts as long as this transaction: milliseconds.
-- Narrowing the old table to [MINVALUE, T0) needs a validated CHECK, whose scan must not run
-- under that lock, so the maintenance pass does it later in its own transactions (CHECK NOT
-- VALID, then VALIDATE under SHARE UPDATE EXCLUSIVE, which lets reads and writes go on, then a
-- catalog-only swap). An empty history (a fresh install) gets the final layout here and now.
--
-- No primary key on the parent: a partitioned table's unique index must contain the partition
-- key, and (id, finished_at) would enforce nothing an id index does not. Ids come from
-- jobs.id (an identity), and a job is in history only after leaving jobs in the same statement.
-- Each leaf gets its own index on id (getJob, the job page, retry by id); the parent gets every
-- non-unique index the old table had (this file copies them, so an index another version added
-- is kept too) and passes them on to every partition created or attached later.

ALTER TABLE job_history RENAME TO job_history_legacy;

DO $$
DECLARE
  r record;
BEGIN
  -- The parent takes the old indexes' names; the old ones get a _legacy name.
  FOR r IN
    SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'job_history_legacy'::regclass AND NOT i.indisunique AND i.indisvalid
    ORDER BY c.relname
  LOOP
    EXECUTE format('ALTER INDEX %I RENAME TO %I', r.name, left('legacy_' || r.name, 63));
  END LOOP;
  IF EXISTS (SELECT 1 FROM pg_class WHERE relname = 'job_history_pkey' AND relnamespace = current_schema()::regnamespace) THEN
    ALTER INDEX job_history_pkey RENAME TO job_history_legacy_pkey;
  END IF;

  CREATE TABLE job_history (LIKE job_history_legacy INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)
    PARTITION BY RANGE (finished_at);
  ALTER TABLE job_history ATTACH PARTITION job_history_legacy FOR VALUES FROM (MINVALUE) TO (MAXVALUE);

  -- Each parent index finds its equivalent on the old table and attaches it (no build).
  FOR r IN
    SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'job_history_legacy'::regclass AND NOT i.indisunique AND i.indisvalid
    ORDER BY c.relname
  LOOP
    EXECUTE regexp_replace(r.def, '^CREATE INDEX \S+ ON \S+ ', format('CREATE INDEX %I ON job_history ', substr(r.name, 8)));
  END LOOP;

  IF NOT EXISTS (SELECT 1 FROM job_history_legacy) THEN
    -- Nothing to keep: the final layout at once, without the old table.
    ALTER TABLE job_history DETACH PARTITION job_history_legacy;
    DROP TABLE job_history_legacy;
    CREATE TABLE job_history_current PARTITION OF job_history FOR VALUES FROM (MINVALUE) TO (MAXVALUE)
      PARTITION BY LIST (state);
    CREATE TABLE job_history_failed PARTITION OF job_history_current FOR VALUES IN ('failed')
      WITH (autovacuum_vacuum_insert_scale_factor = 0.05);
    CREATE INDEX job_history_failed_id_idx ON job_history_failed (id);
    CREATE TABLE job_history_done PARTITION OF job_history_current FOR VALUES IN ('completed', 'cancelled')
      PARTITION BY RANGE (finished_at);
    CREATE TABLE job_history_done_default PARTITION OF job_history_done DEFAULT
      WITH (autovacuum_vacuum_insert_scale_factor = 0.05);
    CREATE INDEX job_history_done_default_id_idx ON job_history_done_default (id);
  END IF;
END
$$;
