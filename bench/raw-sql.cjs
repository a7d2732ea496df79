'use strict';
// The raw-SQL reference: the least a job queue on PostgreSQL must do, written by hand with `pg`
// on a minimal table. Every library figure is shown as a ratio to this ceiling, measured in the
// same run on the same server.
//
// Commit mode matches the library's default: claims and deletions commit with
// synchronous_commit = off for that statement only (set_config(..., true) in the statement, as
// lib/db/store-context.ts does with asyncCommit: true); inserts commit durably.

const TABLE = 'raw_jobs';
const CHANNEL = 'raw_jobs';
const ASYNC = `(SELECT set_config('synchronous_commit', 'off', true)) = 'off'`;

const statements = {};

module.exports = {
  TABLE,
  CHANNEL,

  schema: `
    CREATE TABLE ${TABLE} (
      id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      queue        text        NOT NULL,
      payload      jsonb       NOT NULL,
      state        text        NOT NULL DEFAULT 'waiting',
      run_at       timestamptz NOT NULL DEFAULT now(),
      attempt      integer     NOT NULL DEFAULT 0,
      locked_until timestamptz
    );
    CREATE INDEX ${TABLE}_claim_idx ON ${TABLE} (queue, run_at, id) WHERE state = 'waiting'`,

  /** $1 queue $2 payload (JSON text): one job, and its wake-up, in one autocommitted statement. */
  insertOne: `
    WITH ins AS (INSERT INTO ${TABLE} (queue, payload) VALUES ($1, $2::jsonb) RETURNING id)
    SELECT id, pg_notify('${CHANNEL}', $1) FROM ins`,

  /** $1 queue $2 payload[]: a multi-row INSERT ... SELECT FROM unnest, and one NOTIFY. */
  insertMany: `
    WITH ins AS (
      INSERT INTO ${TABLE} (queue, payload) SELECT $1, p::jsonb FROM unnest($2::text[]) AS p RETURNING id
    )
    SELECT id, (SELECT pg_notify('${CHANNEL}', $1)) AS woken FROM ins`,

  /** $1 queue $2 limit: claims up to $2 due jobs, oldest first, skipping rows others hold. */
  claim: `
    UPDATE ${TABLE} SET state = 'active', attempt = attempt + 1, locked_until = now() + interval '30 seconds'
    WHERE id IN (
      SELECT id FROM ${TABLE}
      WHERE state = 'waiting' AND queue = $1 AND run_at <= now()
      ORDER BY run_at, id LIMIT $2
      FOR UPDATE SKIP LOCKED
    ) AND ${ASYNC}
    RETURNING id, payload`,

  /** $1 id[]: the claimed batch is done. */
  remove: `DELETE FROM ${TABLE} WHERE id = ANY($1::bigint[]) AND ${ASYNC}`,

  /** $1 how many: a backlog, inserted directly (the drain workloads' preload). */
  preload: `INSERT INTO ${TABLE} (queue, payload) SELECT 'bench', jsonb_build_object('i', g) FROM generate_series(1, $1) AS g`,

  /** A pg query config that runs statement `key` (insertOne, insertMany, claim, remove) prepared under its name. */
  named(key, values) {
    return { name: `raw_${key}`, text: (statements[key] ??= module.exports[key]), values };
  },
};
