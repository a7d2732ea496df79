-- nestjs-pg-queue schema, version 17: a group key per job (issue 29: per-tenant concurrency, fair
-- turns and per-group rate limits in one queue). NULL on every job added without a group.
-- Catalog-only on both tables and on every history partition (a nullable column without a
-- default rewrites no row); partitions created later copy the parent (LIKE job_history).
-- The claim's indexes and the per-group settings table join this file with the grouped claim
-- (lib/db/claim-grouped.ts).
ALTER TABLE jobs ADD COLUMN group_key text;
ALTER TABLE job_history ADD COLUMN group_key text;
