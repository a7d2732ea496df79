-- nestjs-pg-queue schema, version 21: no index of grouped running jobs.
-- Migration 17's jobs_group_active_idx (queue, group_key) WHERE state = 'active' AND group_key IS
-- NOT NULL took an entry for every job a grouped queue's claim marks active (the claim changes
-- state, so its update is never HOT), fair turns only or not. It served one read on the claim's
-- path: the running count of each group with a concurrency limit, one count per visited group.
-- Here that count is one pass over the queue's active rows on jobs_active_idx (queue,
-- locked_until) WHERE state = 'active', which every claim already writes: as many rows as jobs
-- run on all nodes, the bound migration 5 chose for the rescuer and globalConcurrency, and read
-- only when a limit needs it (FIFO, a concurrency option, or a stored override of a visited group).
-- Measured (bench/groups.mjs, 200,000 jobs, one group holding 90 %, 4 runs on a quiet machine):
-- the grouped drain went from 0.74-0.79x of the ungrouped queue's to 0.82-0.87x with the index
-- dropped; the claim's UPDATE of 324 jobs from 4.7-4.9 to 4.0-4.4 ms in a claim loop.
-- The dashboard's group reads (lib/db/group-counts.ts, the jobs list's group filter) read active
-- rows the same way, bounded as before. The function below is version 20's with step 3 rewritten,
-- and the stored-override check of the visited groups read once (it ran in steps 2 and 3, and the
-- lone-group path probed again).
DROP INDEX jobs_group_active_idx;

CREATE OR REPLACE FUNCTION claim_grouped(p_queue text, p_limit int, p_worker text, p_lease_ms float8, p_cursor text,
    p_concurrency int, p_fifo boolean, p_rate_max int, p_rate_ms bigint, p_max_groups int, p_ungrouped boolean)
  RETURNS TABLE (next_cursor text, id bigint, name text, payload jsonb, priority int, attempt int, max_attempts int,
                 backoff jsonb, timeout_ms int, errors jsonb, cancel_requested boolean, run_at_ms float8, created_at_ms float8,
                 started_at_ms float8, progress jsonb, trace jsonb, unique_key text, group_key text)
  LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
-- The result columns share names with jobs' columns and are never read here: a name in a query
-- is the column.
#variable_conflict use_column
DECLARE
  limited boolean := p_fifo OR p_concurrency IS NOT NULL OR p_rate_max IS NOT NULL;
  lock_prefix text := 'nestjs-pg-queue:group:' || pg_catalog.current_schema() || ':' || p_queue || ':';
  n_max int := least(p_max_groups, p_limit);
  keys text[];
  more text[];
  caps int[];
  got int[];
  asked int[];
  ids bigint[] := '{}';
  took bigint[];
  took_keys text[];
  counts int[];
  cur text := p_cursor;
  remaining int := p_limit;
  open_groups int;
  share int;
  c int;
  i int;
  ts timestamptz;
  run_keys text[] := '{}';
  run_n int[] := '{}';
  overrides boolean;
BEGIN
  IF EXISTS (SELECT 1 FROM queues q WHERE q.name = p_queue AND q.paused) THEN
    RETURN QUERY SELECT p_cursor, NULL::bigint, NULL::text, NULL::jsonb, NULL::int, NULL::int, NULL::int, NULL::jsonb, NULL::int, NULL::jsonb, NULL::boolean,
      NULL::float8, NULL::float8, NULL::float8, NULL::jsonb, NULL::jsonb, NULL::text, NULL::text;
    RETURN;
  END IF;
  -- 1. The groups whose turn it is: the next ones after the cursor in group_key order, by a loose
  -- index scan (one probe per group, however many jobs each holds), then from the first (wrapping
  -- once) up to the cursor. At most n_max, so the probes are bounded by the claim, not by the
  -- number of groups.
  -- Two statements, not `p_cursor IS NULL OR group_key > p_cursor`: this file's header says why.
  IF p_cursor IS NULL THEN
    WITH RECURSIVE nxt AS (
      (SELECT j.group_key AS k, 1 AS n FROM jobs j
       WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key IS NOT NULL
       ORDER BY j.group_key LIMIT 1)
      UNION ALL
      SELECT (SELECT j.group_key FROM jobs j WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key > nxt.k
              ORDER BY j.group_key LIMIT 1), nxt.n + 1
      FROM nxt WHERE nxt.k IS NOT NULL AND nxt.n < n_max
    )
    SELECT coalesce(pg_catalog.array_agg(nxt.k ORDER BY nxt.n), '{}') INTO keys FROM nxt WHERE nxt.k IS NOT NULL;
  ELSE
    WITH RECURSIVE nxt AS (
      (SELECT j.group_key AS k, 1 AS n FROM jobs j
       WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key IS NOT NULL AND j.group_key > p_cursor
       ORDER BY j.group_key LIMIT 1)
      UNION ALL
      SELECT (SELECT j.group_key FROM jobs j WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key > nxt.k
              ORDER BY j.group_key LIMIT 1), nxt.n + 1
      FROM nxt WHERE nxt.k IS NOT NULL AND nxt.n < n_max
    )
    SELECT coalesce(pg_catalog.array_agg(nxt.k ORDER BY nxt.n), '{}') INTO keys FROM nxt WHERE nxt.k IS NOT NULL;
  END IF;
  IF pg_catalog.cardinality(keys) < n_max AND p_cursor IS NOT NULL THEN
    WITH RECURSIVE nxt AS (
      (SELECT j.group_key AS k, 1 AS n FROM jobs j
       WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key IS NOT NULL AND j.group_key <= p_cursor
       ORDER BY j.group_key LIMIT 1)
      UNION ALL
      SELECT (SELECT j.group_key FROM jobs j WHERE j.queue = p_queue AND j.state = 'waiting' AND j.group_key > nxt.k
              AND j.group_key <= p_cursor ORDER BY j.group_key LIMIT 1), nxt.n + 1
      FROM nxt WHERE nxt.k IS NOT NULL AND nxt.n < n_max - pg_catalog.cardinality(keys)
    )
    SELECT coalesce(pg_catalog.array_agg(nxt.k ORDER BY nxt.n), '{}') INTO more FROM nxt WHERE nxt.k IS NOT NULL;
    keys := keys || more;
  END IF;
  -- 2. Per-group try-locks (a group another node's claim holds is skipped, never waited for):
  -- every group of a queue with limits; otherwise only groups with a stored concurrency.
  -- Whether a visited group has a stored concurrency: read once, for the three places below.
  overrides := EXISTS (SELECT 1 FROM job_groups s WHERE s.queue = p_queue AND s.group_key = ANY(keys) AND s.concurrency IS NOT NULL);
  IF limited THEN
    SELECT coalesce(pg_catalog.array_agg(u.k ORDER BY u.o), '{}') INTO keys FROM pg_catalog.unnest(keys) WITH ORDINALITY u(k, o)
    WHERE pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(lock_prefix || u.k, 0));
  ELSIF overrides THEN
    SELECT coalesce(pg_catalog.array_agg(u.k ORDER BY u.o), '{}') INTO keys FROM pg_catalog.unnest(keys) WITH ORDINALITY u(k, o)
    WHERE NOT EXISTS (SELECT 1 FROM job_groups s WHERE s.queue = p_queue AND s.group_key = u.k AND s.concurrency IS NOT NULL)
       OR pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(lock_prefix || u.k, 0));
  END IF;
  -- The common case of a flood: one group found, no limit of any kind (none in the options, no
  -- stored override of it) and no turn for jobs without a group. Its jobs in the queue's order,
  -- claimed by one statement as the plain claim does (claim.ts): none of the per-group
  -- bookkeeping below, which costs about as much as the claim itself (issue 29, docs/groups.md).
  IF NOT limited AND NOT p_ungrouped AND pg_catalog.cardinality(keys) = 1
     AND (NOT overrides OR NOT EXISTS (SELECT 1 FROM job_groups s WHERE s.queue = p_queue AND s.group_key = keys[1] AND s.concurrency IS NOT NULL)) THEN
    cur := keys[1];
    ts := pg_catalog.clock_timestamp();
    RETURN QUERY
      UPDATE jobs j
      SET state = 'active', attempt = least(j.attempt, 2147483646) + 1, locked_by = p_worker,
          locked_until = ts + p_lease_ms * interval '1 millisecond', started_at = ts
      WHERE j.id = ANY(ARRAY(
        SELECT h.id FROM jobs h
        WHERE h.queue = p_queue AND h.group_key = cur AND h.state = 'waiting' AND h.run_at <= pg_catalog.now()
        ORDER BY h.priority, h.run_at, h.id LIMIT p_limit FOR UPDATE SKIP LOCKED))
      RETURNING cur, j.id, j.name, j.payload, j.priority, j.attempt, j.max_attempts, j.backoff, j.timeout_ms,
                nullif(j.errors, '[]'), CASE WHEN j.cancel_requested_at IS NOT NULL THEN true END,
                extract(epoch FROM j.run_at)::float8 * 1000::float8, extract(epoch FROM j.created_at)::float8 * 1000::float8,
                extract(epoch FROM j.started_at)::float8 * 1000::float8, j.progress, j.trace, j.unique_key, j.group_key;
    IF NOT FOUND THEN
      RETURN QUERY SELECT cur, NULL::bigint, NULL::text, NULL::jsonb, NULL::int, NULL::int, NULL::int, NULL::jsonb, NULL::int, NULL::jsonb, NULL::boolean,
      NULL::float8, NULL::float8, NULL::float8, NULL::jsonb, NULL::jsonb, NULL::text, NULL::text;
    END IF;
    RETURN;
  END IF;
  -- 3. What each may start now, read in statements after the locks (a fresh snapshot: they see
  -- what the lock's previous holder committed): its limit (stored override, else the option; 1
  -- for FIFO) less its running jobs, and its rate window's room. The running jobs of every
  -- visited group are counted in one pass over the queue's active rows (jobs_active_idx: as many
  -- as jobs run on all nodes), and only where a limit needs them.
  IF p_fifo OR p_concurrency IS NOT NULL
     OR overrides THEN
    SELECT coalesce(pg_catalog.array_agg(r.k), '{}'), coalesce(pg_catalog.array_agg(r.n), '{}') INTO run_keys, run_n
    FROM (SELECT a.group_key AS k, pg_catalog.count(*)::int AS n FROM jobs a
          WHERE a.queue = p_queue AND a.state = 'active' AND a.group_key = ANY(keys) GROUP BY a.group_key) r;
  END IF;
  SELECT coalesce(pg_catalog.array_agg(
           least(CASE WHEN p_fifo OR coalesce(s.concurrency, p_concurrency) IS NOT NULL
                      THEN CASE WHEN p_fifo THEN 1 ELSE coalesce(s.concurrency, p_concurrency) END
                           - coalesce((SELECT r.n FROM ROWS FROM (pg_catalog.unnest(run_keys), pg_catalog.unnest(run_n)) r(k, n)
                                       WHERE r.k = u.k), 0)
                      ELSE p_limit END,
                 coalesce(p_rate_max - (SELECT pg_catalog.count(*) FROM pg_catalog.unnest(s.recent_starts) t
                                        WHERE t > pg_catalog.clock_timestamp() - p_rate_ms::float8 * interval '1 millisecond')::int,
                          p_limit))
           ORDER BY u.o), '{}')
    INTO caps
  FROM pg_catalog.unnest(keys) WITH ORDINALITY u(k, o)
  LEFT JOIN job_groups s ON s.queue = p_queue AND s.group_key = u.k;
  got := pg_catalog.array_fill(0, ARRAY[pg_catalog.cardinality(keys)]);
  -- Jobs without a group, on their turn: one more group with no limits, found among the queue's
  -- next 1,000 due jobs in its own order (jobs_claim_idx): no index holds them apart (one would
  -- cost every ungrouped queue), so a longer walk past grouped jobs would cost every claim.
  IF p_ungrouped THEN
    SELECT pg_catalog.count(*)::int INTO open_groups FROM pg_catalog.unnest(caps) x WHERE x > 0;
    share := pg_catalog.ceil(p_limit::numeric / (open_groups + 1))::int;
    SELECT coalesce(pg_catalog.array_agg(x.id), '{}') INTO took FROM (
      SELECT j.id FROM jobs j
      WHERE j.id = ANY(ARRAY(
        SELECT n.id FROM (
          SELECT w.id, w.group_key FROM jobs w
          WHERE w.queue = p_queue AND w.state = 'waiting' AND w.run_at <= pg_catalog.now()
          ORDER BY w.priority, w.run_at, w.id LIMIT 1000) n
        WHERE n.group_key IS NULL LIMIT share))
        AND j.state = 'waiting' AND j.group_key IS NULL
      FOR UPDATE SKIP LOCKED) x;
    ids := ids || took;
    remaining := remaining - pg_catalog.cardinality(took);
  END IF;
  -- 4. Equal shares of the slots left, one statement per round for every group at once; a group
  -- with fewer due jobs than its share leaves the rest to the others in the next round.
  -- FIFO: a group's next job is its oldest (by id), taken only when due: one per group.
  LOOP
    EXIT WHEN remaining <= 0;
    open_groups := 0;
    FOR i IN 1 .. pg_catalog.cardinality(keys) LOOP
      IF caps[i] > got[i] THEN
        open_groups := open_groups + 1;
      END IF;
    END LOOP;
    EXIT WHEN open_groups = 0;
    share := pg_catalog.ceil(remaining::numeric / open_groups)::int;
    asked := '{}';
    FOR i IN 1 .. pg_catalog.cardinality(keys) LOOP
      asked := asked || CASE WHEN caps[i] > got[i] THEN least(share, caps[i] - got[i]) ELSE 0 END;
    END LOOP;
    IF p_fifo THEN
      SELECT coalesce(pg_catalog.array_agg(x.id), '{}'), coalesce(pg_catalog.array_agg(x.group_key), '{}') INTO took, took_keys FROM (
        SELECT j.id, j.group_key FROM jobs j
        WHERE j.id = ANY(ARRAY(
          SELECT (SELECT h.id FROM jobs h WHERE h.queue = p_queue AND h.group_key = u.k AND h.state = 'waiting' ORDER BY h.id LIMIT 1)
          FROM ROWS FROM (pg_catalog.unnest(keys), pg_catalog.unnest(asked)) u(k, a) WHERE u.a > 0))
          AND j.state = 'waiting' AND j.run_at <= pg_catalog.now()
        FOR UPDATE SKIP LOCKED) x;
    ELSE
      SELECT coalesce(pg_catalog.array_agg(x.id), '{}'), coalesce(pg_catalog.array_agg(x.k), '{}') INTO took, took_keys FROM (
        SELECT u.k, l.id FROM ROWS FROM (pg_catalog.unnest(keys), pg_catalog.unnest(asked)) WITH ORDINALITY u(k, a, o)
        CROSS JOIN LATERAL (
          SELECT j.id FROM jobs j
          WHERE j.queue = p_queue AND j.group_key = u.k AND j.state = 'waiting' AND j.run_at <= pg_catalog.now()
            AND j.id <> ALL(ids)
          ORDER BY j.priority, j.run_at, j.id LIMIT u.a FOR UPDATE SKIP LOCKED) l
        WHERE u.a > 0
        LIMIT remaining) x;
    END IF;
    EXIT WHEN pg_catalog.cardinality(took) = 0;
    ids := ids || took;
    remaining := remaining - pg_catalog.cardinality(took);
    -- Each group's take, counted in one statement (version 17 ran one count per group visited:
    -- 128 statements over the round's rows, a third of a fair-turn claim's time).
    SELECT pg_catalog.array_agg(coalesce(t.n, 0) ORDER BY u.o) INTO counts
    FROM pg_catalog.unnest(keys) WITH ORDINALITY u(k, o)
    LEFT JOIN (SELECT x AS k, pg_catalog.count(*)::int AS n FROM pg_catalog.unnest(took_keys) x GROUP BY x) t ON t.k = u.k;
    FOR i IN 1 .. pg_catalog.cardinality(keys) LOOP
      CONTINUE WHEN asked[i] = 0;
      c := counts[i];
      got[i] := got[i] + c;
      -- Fewer than asked: the group has no more due jobs (or other claims hold them) this turn.
      IF c < asked[i] THEN
        caps[i] := got[i];
      END IF;
    END LOOP;
    EXIT WHEN p_fifo;
  END LOOP;
  -- The cursor: the last group served (the next claim starts after it), else the last visited.
  FOR i IN 1 .. pg_catalog.cardinality(keys) LOOP
    IF got[i] > 0 OR i = pg_catalog.cardinality(keys) THEN
      cur := keys[i];
    END IF;
  END LOOP;
  -- The jobs' start: the clock now, after every group's lock and count, not the transaction's
  -- start (now()). A job of the group that finished while this claim ran has a finished_at (its
  -- transaction's now()) before this, so the started_at and finished_at stored in history show
  -- the limits as the claim kept them. The rate windows record the same instant.
  ts := pg_catalog.clock_timestamp();
  IF p_rate_max IS NOT NULL THEN
    INSERT INTO job_groups AS s (queue, group_key, recent_starts)
    SELECT p_queue, u.k, pg_catalog.array_fill(ts, ARRAY[u.n]) FROM ROWS FROM (pg_catalog.unnest(keys), pg_catalog.unnest(got)) u(k, n) WHERE u.n > 0
    ON CONFLICT (queue, group_key) DO UPDATE SET recent_starts = (
      SELECT coalesce(pg_catalog.array_agg(t ORDER BY t), '{}') FROM (
        SELECT t FROM pg_catalog.unnest(pg_catalog.array_cat(s.recent_starts, EXCLUDED.recent_starts)) t
        WHERE t > ts - p_rate_ms::float8 * interval '1 millisecond'
        ORDER BY t DESC LIMIT p_rate_max) newest);
  END IF;
  IF pg_catalog.cardinality(ids) = 0 THEN
    RETURN QUERY SELECT cur, NULL::bigint, NULL::text, NULL::jsonb, NULL::int, NULL::int, NULL::int, NULL::jsonb, NULL::int, NULL::jsonb, NULL::boolean,
      NULL::float8, NULL::float8, NULL::float8, NULL::jsonb, NULL::jsonb, NULL::text, NULL::text;
    RETURN;
  END IF;
  RETURN QUERY
    UPDATE jobs j
    SET state = 'active', attempt = least(j.attempt, 2147483646) + 1, locked_by = p_worker,
        locked_until = ts + p_lease_ms * interval '1 millisecond', started_at = ts
    WHERE j.id = ANY(ids)
    RETURNING cur, j.id, j.name, j.payload, j.priority, j.attempt, j.max_attempts, j.backoff, j.timeout_ms,
              nullif(j.errors, '[]'), CASE WHEN j.cancel_requested_at IS NOT NULL THEN true END,
                extract(epoch FROM j.run_at)::float8 * 1000::float8, extract(epoch FROM j.created_at)::float8 * 1000::float8,
                extract(epoch FROM j.started_at)::float8 * 1000::float8, j.progress, j.trace, j.unique_key, j.group_key;
END
$fn$;
