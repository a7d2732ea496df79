import { escapeIdentifier } from 'pg';
import type { ChildFailurePolicy, ChildResult, JobAttemptError, JobFlow } from '../core/job';
import type { SqlExecutor } from './executor';

/**
 * The reads of flows and dependencies (migration 0008), for one schema: a parent's children, and
 * a job's place in a flow (the dashboard reads the children too). The insert of a flow is
 * flow-insert.ts; the edges' retention is maintenance.ts. The release of a parent is not here:
 * it is the trigger of that migration, which runs in whatever statement moves a child out of the
 * jobs table (complete, fail, cancel, rescue, remove), so no outcome statement of the hot path
 * changed for it.
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
      SELECT (SELECT coalesce(pg_catalog.array_agg(parent_id::text ORDER BY parent_id), '{}') FROM ${deps} WHERE child_id = $1) AS parent_ids,
             (SELECT count(*) FROM ${deps} WHERE parent_id = $1)::int AS dependencies,
             (SELECT count(*) FROM ${deps} WHERE parent_id = $1 AND state IS NULL)::int AS pending,
             (SELECT coalesce(pg_catalog.array_agg(child_id::text ORDER BY child_id), '{}') FROM (
                SELECT child_id FROM ${deps} WHERE parent_id = $1 AND state IS NULL ORDER BY child_id LIMIT 100) p
             ) AS pending_ids`,
  };
}

export type FlowQueries = ReturnType<typeof buildFlowQueries>;

/**
 * A parent's children and a job's place in a flow, on the queue's pool or on a caller's transaction.
 * No code here releases a parent: the trigger `jobs_release_dependents` (function
 * `job_left_live_table()`, migrations/0008_flows.sql) does, in the statement that finishes each
 * child (marks the edge, fails or frees the parent). The flows and edges it resolves are inserted
 * by flow-insert.ts.
 */
export class FlowStore {
  private readonly q: FlowQueries;

  constructor(
    schema: string,
    private readonly db: SqlExecutor,
  ) {
    this.q = buildFlowQueries(schema);
  }

  /** The children (dependencies) of a job, as they are now, by id; `limit` null for all. */
  async children(parentId: string, limit: number | null, db: SqlExecutor = this.db): Promise<ChildResult[]> {
    type Row = {
      id: string;
      on_failure: ChildFailurePolicy;
      queue: string | null;
      name: string | null;
      state: ChildResult['state'];
      result: unknown;
      last_error: JobAttemptError | null;
    };
    // One statement over the parent history table (every partition's id index per child), not the
    // pruned per-child form (history/by-id.ts): for a 10,000-child fan-in that form was costed past
    // jit_above_cost, so a server with JIT on compiled it at each call (and one whose JIT library
    // was missing, as in the Testcontainers image, failed it). childResults runs once per parent run.
    const rows = await db.query<Row>(this.q.children, [parentId, limit]);
    return rows.map((r) => ({
      id: r.id,
      queue: r.queue,
      name: r.name,
      state: r.state,
      result: r.state === 'completed' ? (r.result ?? null) : null,
      error: r.last_error ?? null,
      onFailure: r.on_failure,
    }));
  }

  /** A job's place in a flow; undefined when it has neither parents nor dependencies. */
  async flowOf(id: string, db: SqlExecutor = this.db): Promise<JobFlow | undefined> {
    const [r] = await db.query<{ parent_ids: string[]; dependencies: number; pending: number; pending_ids: string[] }>(
      this.q.flowOf,
      [id],
    );
    if (!r || (r.parent_ids.length === 0 && r.dependencies === 0)) return undefined;
    return {
      parentIds: r.parent_ids,
      dependencies: r.dependencies,
      pendingDependencies: r.pending,
      pendingDependencyIds: r.pending_ids,
    };
  }
}
