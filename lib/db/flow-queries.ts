import { escapeIdentifier } from 'pg';
import { DURABLE } from './queries';

/**
 * The statements of flows and dependencies (migration 0008), for one schema. The release of a
 * parent is not here: it is the trigger of that migration, which runs in whatever statement
 * moves a child out of the jobs table (complete, fail, cancel, rescue, remove), so no outcome
 * statement of the hot path changed for it.
 */
export function buildFlowQueries(schema: string) {
  const s = escapeIdentifier(schema);
  const jobs = `${s}.jobs`;
  const history = `${s}.job_history`;
  const deps = `${s}.job_dependencies`;
  // The children reads' select list and their edges joined to the live jobs; each adds how it finds finished children (h).
  const childrenFrom = `SELECT d.child_id::text AS id, d.on_failure, d.state AS edge_state,
             coalesce(l.queue, h.queue) AS queue, coalesce(l.name, h.name) AS name,
             coalesce(CASE WHEN l.state = 'waiting' AND l.run_at > now() THEN 'delayed' ELSE l.state END, h.state, d.state) AS state,
             h.result, coalesce(l.errors, h.errors) -> -1 AS last_error
      FROM ${deps} d
      LEFT JOIN ${jobs} l ON l.id = d.child_id`;
  return {
    /**
     * dependsOn: marks the live ones among existing jobs as having dependents, which locks
     * them until the enqueue's transaction ends. A dependency that finishes meanwhile waits for
     * that lock, then deletes the row as marked, so its trigger sees the new edges (committed
     * with the mark). Those not returned are finished or unknown. A top-level SELECT: TypeORM's
     * query() answers an UPDATE with [rows, count], a SELECT with its rows. $1 id[]
     */
    lockDependencies: `
      WITH marked AS (UPDATE ${jobs} SET has_dependents = true WHERE id = ANY($1::bigint[]) RETURNING id)
      SELECT id::text AS id FROM marked`,

    /**
     * The dependencies that were not live: how they ended (a fresh snapshot, READ COMMITTED, so
     * one that finished while the lock above waited is seen here). $1 id[]
     */
    finishedDependencies: `SELECT id::text AS id, state FROM ${history} WHERE id = ANY($1::bigint[])`,

    /**
     * A job's children in id order, each as it is now (live, else in history, else as its edge
     * recorded it: pruned or removed), in one statement: two primary-key probes per child.
     * $1 parent id $2 limit (NULL: all)
     */
    children: `
      ${childrenFrom}
      LEFT JOIN ${history} h ON h.id = d.child_id
      WHERE d.parent_id = $1
      ORDER BY d.child_id
      LIMIT $2`,

    /**
     * What getJob adds for a job in a flow: the jobs that wait on it, and its dependencies
     * (how many, how many still pending, the first 100 pending ids). Four index probes. $1 id
     */
    flowOf: `
      SELECT (SELECT coalesce(array_agg(parent_id::text ORDER BY parent_id), '{}') FROM ${deps} WHERE child_id = $1) AS parent_ids,
             (SELECT count(*) FROM ${deps} WHERE parent_id = $1)::int AS dependencies,
             (SELECT count(*) FROM ${deps} WHERE parent_id = $1 AND state IS NULL)::int AS pending,
             (SELECT coalesce(array_agg(child_id::text ORDER BY child_id), '{}') FROM (
                SELECT child_id FROM ${deps} WHERE parent_id = $1 AND state IS NULL ORDER BY child_id LIMIT 100) p
             ) AS pending_ids`,

    /**
     * Maintenance: the edges of parents that finished longer ago than the shortest retention
     * and are in neither table any more (pruned or removed), a batch at a time, oldest first.
     * $1 ms $2 batch
     */
    pruneDependencies: `
      DELETE FROM ${deps} WHERE (child_id, parent_id) IN (
        SELECT d.child_id, d.parent_id FROM ${deps} d
        WHERE d.parent_finished_at < now() - $1::bigint * interval '1 millisecond'
          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.id = d.parent_id)
          AND NOT EXISTS (SELECT 1 FROM ${history} h WHERE h.id = d.parent_id)
        ORDER BY d.parent_finished_at
        LIMIT $2)`,
  };
}

export type FlowQueries = ReturnType<typeof buildFlowQueries>;

/**
 * The flow insert: every job of a tree (or one job with dependencies on existing jobs) in one
 * statement, whatever its size. Ids are drawn from the identity's sequence first, so each
 * child's edge can name its parent's id in the same statement (`parent` is the position, 1-based,
 * of a node's parent in the input; 0 for none). A node with unfinished dependencies starts as
 * 'waiting-children' with its count; the others as 'waiting'. Edges to existing jobs (`ext_*`)
 * carry the state they already ended in, or NULL while live. One NOTIFY per queue for the jobs
 * that can run, delivered on commit. Every column travels as an array: flows are not the hot path.
 * $1 payload[] $2 queue[] $3 name[] $4 priority[] $5 run_at[] $6 delay_ms[] $7 max_attempts[]
 * $8 backoff[] $9 timeout_ms[] $10 parent[] $11 on_failure[] $12 pending[] $13 has_dependencies[]
 * $14 ext_parent[] $15 ext_child_id[] $16 ext_on_failure[] $17 ext_state[] $18 channel $19 trace[]
 * (each job's W3C trace context, migration 0009: every job of a flow records the span it was built in)
 */
export function buildFlowInsert(schema: string, durable: boolean): string {
  const s = escapeIdentifier(schema);
  return `
    WITH input AS MATERIALIZED (
      SELECT t.*, nextval(pg_get_serial_sequence('${s}.jobs', 'id')) AS id
      FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::bigint[], $7::int[],
                  $8::text[], $9::int[], $10::int[], $11::text[], $12::int[], $13::boolean[], $19::text[])
           WITH ORDINALITY AS t(payload, queue, name, priority, run_at, delay_ms, max_attempts, backoff, timeout_ms,
                                parent, on_failure, pending, has_dependencies, trace, ord)
      ${durable ? `WHERE ${DURABLE}` : ''}
    ), ins AS (
      INSERT INTO ${s}.jobs (id, queue, name, payload, state, priority, run_at, max_attempts, backoff, timeout_ms,
                             pending_dependencies, has_dependents, has_dependencies, trace)
      OVERRIDING SYSTEM VALUE
      SELECT id, queue, name, payload::jsonb, CASE WHEN pending > 0 THEN 'waiting-children' ELSE 'waiting' END,
             priority, coalesce(run_at, now() + delay_ms * interval '1 millisecond'), max_attempts, backoff::jsonb,
             timeout_ms, pending, parent > 0, has_dependencies, trace::jsonb
      FROM input ORDER BY ord
      RETURNING id, queue, run_at, state
    ), edges AS (
      INSERT INTO ${s}.job_dependencies (child_id, parent_id, on_failure, state, resolved_at)
      SELECT c.id, p.id, c.on_failure, NULL, NULL FROM input c JOIN input p ON p.ord = c.parent
      UNION ALL
      SELECT e.child_id, p.id, e.on_failure, e.state, CASE WHEN e.state IS NULL THEN NULL ELSE now() END
      FROM unnest($14::int[], $15::bigint[], $16::text[], $17::text[]) AS e(parent, child_id, on_failure, state)
      JOIN input p ON p.ord = e.parent
      RETURNING 1
    ), wake AS (
      SELECT pg_notify($18, queue || '|' || greatest(0, ceil(extract(epoch FROM min(run_at) - now()) * 1000))::bigint)
      FROM ins WHERE state = 'waiting' GROUP BY queue
    )
    SELECT (SELECT coalesce(array_agg(id::text ORDER BY ord), '{}') FROM input) AS ids,
           now() AS now,
           (SELECT count(*) FROM edges)::int AS edges, (SELECT count(*) FROM wake)::int AS woken`;
}
