-- nestjs-pg-queue schema, version 9: job progress and the trace context of the enqueue.
-- Nullable columns without a default: each ALTER only changes the catalog (no table rewrite, no
-- scan), so its ACCESS EXCLUSIVE lock is held for milliseconds whatever the tables' sizes. It
-- still waits for statements already running on the table; claims and outcomes are short.

-- The latest value a handler reported with job.updateProgress() (a number or a small JSON
-- object), written at most once per progressIntervalMs per job. Kept across retries, and carried
-- into history with the job.
ALTER TABLE jobs ADD COLUMN progress jsonb;
ALTER TABLE job_history ADD COLUMN progress jsonb;

-- The W3C trace context active when the job was enqueued ({"traceparent": ..., "tracestate": ...}),
-- when @opentelemetry/api is installed and a span was active; NULL otherwise. The handler's span
-- continues it.
ALTER TABLE jobs ADD COLUMN trace jsonb;
ALTER TABLE job_history ADD COLUMN trace jsonb;
