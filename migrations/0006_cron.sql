-- nestjs-pg-queue schema, version 6: recurring jobs.
-- One row per schedule (queue and job name): the last tick enqueued. A node enqueues a tick only
-- by moving last_tick forward in the statement that inserts the job, so each tick becomes one
-- job however many nodes run the schedule, and a restart can catch up exactly the ticks missed.
CREATE TABLE cron_schedules (
  key        text        PRIMARY KEY,
  last_tick  timestamptz NOT NULL
);
