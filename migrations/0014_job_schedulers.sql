-- nestjs-pg-queue schema, version 14: job schedulers (BullMQ 6's name), managed at runtime
-- (Queue.upsertJobScheduler) or declared in code (@Process({ cron }), registerQueue({ repeat }),
-- reconciled at boot: source 'code'). Served by lib/db/job-schedulers.ts and
-- lib/worker/job-scheduler-ticker.ts.
-- A node's tick takes the due rows with FOR UPDATE SKIP LOCKED, inserts their jobs and moves
-- next_run_at forward in the same transaction: a tick is one job however many nodes run it.
CREATE TABLE job_schedulers (
  queue        text        NOT NULL,
  id           text        NOT NULL,
  pattern      text,
  every_ms     bigint      CHECK (every_ms >= 1),
  tz           text        NOT NULL DEFAULT 'UTC',
  start_at     timestamptz,
  end_at       timestamptz,
  "limit"      integer     CHECK ("limit" >= 1),
  count        integer     NOT NULL DEFAULT 0,
  job_name     text        NOT NULL,
  payload      jsonb       NOT NULL DEFAULT '{}',
  -- The job options of every tick's job, resolved when the scheduler was upserted:
  -- { priority, maxAttempts, backoff, timeoutMs }.
  job_opts     jsonb       NOT NULL DEFAULT '{}',
  next_run_at  timestamptz,
  paused       boolean     NOT NULL DEFAULT false,
  source       text        NOT NULL DEFAULT 'runtime' CHECK (source IN ('code', 'runtime')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue, id),
  CHECK ((pattern IS NULL) <> (every_ms IS NULL))
);

-- The tick: WHERE NOT paused AND next_run_at <= now() ORDER BY next_run_at, across every queue,
-- in one statement whatever the number of schedulers. Holds only the rows that can come due.
CREATE INDEX job_schedulers_due_idx ON job_schedulers (next_run_at) WHERE NOT paused AND next_run_at IS NOT NULL;
