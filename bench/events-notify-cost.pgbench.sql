-- What a NOTIFY costs a transaction (docs/events.md): run against a database holding
--   CREATE TABLE pgb_rows (id int primary key, n int); INSERT INTO pgb_rows SELECT g, 0 FROM generate_series(1, 1000) g;
-- pgbench -n -c 4 -j 2 -T 6 -f bench/events-notify-cost.pgbench.sql postgres://.../db
-- and again with -D notify=0 (the same transaction, the same payload built, no pg_notify).
\set id random(1, 1000)
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT count(CASE WHEN :notify = 1 THEN pg_notify('pgqueue_events', 'completed|bench|' || s) END) FROM (SELECT string_agg((1000000 + g)::text || '.1', ',') AS s FROM generate_series(1, 200) g) x;
UPDATE pgb_rows SET n = n + 1 WHERE id = :id;
COMMIT;
