-- nestjs-pg-queue schema, version 11: the history keeps only the indexes its reads need, and a
-- small catalog of the id range of each closed partition, so a lookup by id skips the others.
--
-- 1. The (state, finished_at) btree (job_history_retention_idx) lived on the parent, so every
--    completed job wrote an entry into it. Its readers: the batched retention delete (failed jobs,
--    the pre-version-10 table, the default partition), the one-time conversion of that table, and
--    the dashboard's throughput (completed and failed jobs per minute over the last hour). Whole
--    days of completed and cancelled jobs now go by partition drop, so on those partitions only
--    the throughput reads finished_at, and only in the last hour, in finish order: the order the
--    rows were written in. A BRIN index on finished_at answers that (a few pages of summary per
--    partition, nearly nothing written per row) where the btree wrote one entry per job.
--    An index of a partitioned parent cannot be dropped on some partitions only, so the tables
--    that keep the btree (job_history_legacy, job_history_failed, job_history_done_default) are
--    detached first: their index partitions become their own indexes and stay. The parent index
--    is then dropped (on the ranged partitions, catalog only plus the files) and the three tables
--    attached again. Re-attaching the old table reads none of its rows (its partition constraint
--    is proven by its NOT NULL column or by the validated CHECK of the conversion); the failed and
--    default partitions are scanned once to check theirs: as many rows as failed jobs are kept
--    (test/integration/history-migration.int-spec.ts measures it). The ranged partitions whose
--    period ends less than an hour ago, or later, get their BRIN index here (a scan of at most
--    the current partitions); older ones are never read by the throughput, and new ones get it
--    from lib/db/history/partitions.ts when they are created.
-- 2. job_history_id_bounds: for each ranged partition whose period is over (and which no running
--    transaction can still write to), the smallest and largest id it holds, recorded once by the
--    maintenance pass (HistoryPartitions.recordIdBounds). getJob and the other reads by id ask
--    the open partitions (failed, default, those not yet closed) and, of the closed ones, only
--    those whose range holds the id: a nested loop over this table whose inner side is pruned at
--    run time by each row's finish-time range (lib/db/history/by-id.ts, historyByIdParamSql).

CREATE TABLE job_history_id_bounds (
  partition   text        PRIMARY KEY,
  lo          timestamptz NOT NULL,
  hi          timestamptz NOT NULL,
  -- NULL, NULL: the partition was empty when it closed (no lookup visits it).
  min_id      bigint,
  max_id      bigint,
  recorded_at timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE
  r record;
  kept text[] := '{}';
  parents text[] := '{}';
  bounds text[] := '{}';
  i int;
BEGIN
  FOR r IN
    SELECT c.relname AS name, p.relname AS parent, pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid JOIN pg_class p ON p.oid = h.inhparent
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relname IN ('job_history_legacy', 'job_history_failed', 'job_history_done_default')
    ORDER BY c.relname
  LOOP
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', r.parent, r.name);
    kept := kept || r.name::text;
    parents := parents || r.parent::text;
    bounds := bounds || r.bound;
  END LOOP;

  DROP INDEX job_history_retention_idx;

  FOR i IN 1 .. coalesce(array_length(kept, 1), 0) LOOP
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I %s', parents[i], kept[i], bounds[i]);
    -- The index partition, now the table's own: a name that says what it is.
    FOR r IN
      SELECT c.relname AS name FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
      WHERE x.indrelid = format('%I', kept[i])::regclass
        AND pg_get_indexdef(x.indexrelid) LIKE '%(state, finished_at)'
        AND NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = x.indexrelid)
    LOOP
      IF to_regclass(format('%I', kept[i] || '_retention_idx')) IS NULL THEN
        EXECUTE format('ALTER INDEX %I RENAME TO %I', r.name, kept[i] || '_retention_idx');
      ELSIF r.name <> kept[i] || '_retention_idx' THEN
        EXECUTE format('DROP INDEX %I', r.name);
      END IF;
    END LOOP;
  END LOOP;

  IF to_regclass('job_history_done') IS NOT NULL THEN
    FOR r IN
      SELECT c.relname AS name
      FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
      WHERE h.inhparent = 'job_history_done'::regclass AND c.relname <> 'job_history_done_default'
        AND (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz > now() - interval '1 hour'
    LOOP
      EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I USING brin (finished_at) WITH (autosummarize = on)', r.name || '_finished_idx', r.name);
    END LOOP;
  END IF;
END
$$;
