-- nestjs-pg-queue schema, version 18: durable steps (issue 31: job.step(), job.sleep(),
-- job.waitFor(), queue.signal()). One row per step a job recorded, kept while the job lives and
-- after it finishes (the dashboard's job page reads it), removed by maintenance once the job has
-- left both jobs and job_history (lib/db/steps.ts, sweepOrphans).
--
-- Why a table, not a jsonb column on jobs (as job logs are, version 12): a column would have to be
-- carried by every statement that moves a job, the completer's batch completion among them, and
-- plain handlers must pay nothing for steps (the claim and the completer are unchanged); each step
-- would also be an UPDATE of the job's row, a dead tuple on the table the claim scans, holding that
-- row's lock for the whole of a { client } step's transaction (the heartbeat waiting behind it).
-- A row here is an INSERT into a table only step-using jobs touch; its primary key (job_id, name)
-- is the exactly-once guard of a transactional step: a second run of the same step, on any
-- worker, cannot commit a second record, so its transaction (its business writes) rolls back.
-- What it costs: the rows outlive a partition drop of history and are deleted by a sweep, in
-- batches, of rows whose job is in neither table (ids are not ordered by finish time, so no
-- partition of this table could follow history's).
--
-- kind: 'step' (job.step), 'sleep' (job.sleep), 'wait' (job.waitFor; also a signal that arrived
-- before its wait: seq and attempt NULL until the job reaches the wait).
-- status: 'done' (result recorded; for a wait, the signal's payload), 'sleeping' (until wake_at),
-- 'waiting' (for a signal until wake_at, or NULL: no timeout), 'timed-out' (the wait ended
-- without a signal: the handler saw WaitTimeoutError; later signals are refused).
CREATE TABLE job_steps (
  job_id      bigint      NOT NULL,
  name        text        NOT NULL,
  seq         integer,
  kind        text        NOT NULL CHECK (kind IN ('step', 'sleep', 'wait')),
  status      text        NOT NULL CHECK (status IN ('done', 'sleeping', 'waiting', 'timed-out')),
  result      jsonb,
  attempt     integer,
  started_at  timestamptz,
  finished_at timestamptz,
  wake_at     timestamptz,
  PRIMARY KEY (job_id, name)
);

-- The maintenance sweep of steps whose job is gone, oldest first (lib/db/steps.ts, sweepOrphans).
-- finished_at is set on every row (a parked sleep or wait: when it parked; a signal: when sent).
CREATE INDEX job_steps_finished_idx ON job_steps (finished_at);
