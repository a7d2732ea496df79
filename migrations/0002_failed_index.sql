-- nestjs-pg-queue schema, version 2: counting failed jobs per queue (getCounts, health probes)
-- reads this small partial index instead of the whole history.
CREATE INDEX job_history_failed_idx ON job_history (queue) WHERE state = 'failed';
