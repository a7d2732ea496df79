import { escapeIdentifier } from 'pg';
import type { ChildFailurePolicy } from '../core/job';
import { DependencyError } from '../core/errors';
import { clientExecutor, type SqlExecutor } from './executor';
import type { NewJobRow } from './new-job';
import { DURABLE, type SchemaSql, type StoreContext } from './store-context';

/** One job of a flow insert: its row, and where it sits in the tree. */
export interface FlowNodeRow {
  readonly row: NewJobRow;
  /** Index (0-based) of its parent in the same insert; -1 for none. */
  readonly parent: number;
  readonly onFailure: ChildFailurePolicy;
}

/** An edge from a node of the insert to an existing job (`dependsOn`). */
export interface ExistingDependency {
  /** Index (0-based) of the node that waits. */
  readonly node: number;
  readonly id: string;
  readonly onFailure: ChildFailurePolicy;
}

/** What a flow insert returns: the ids in input order, and the transaction's clock. */
export interface FlowInserted {
  readonly ids: string[];
  readonly now: Date;
  /** The state each job started in, in input order. */
  readonly waitingChildren: boolean[];
}

/** An edge to an existing job, with the state that job already ended in (null: still live). */
type ExistingEdge = ExistingDependency & { readonly state: string | null };

/** The locks and reads a flow insert takes on the existing jobs it depends on. */
export function flowInsertStatements({ jobs, history }: SchemaSql) {
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
  };
}

/** The flow insert's node arrays, zipped in order (ROWS FROM, one pg_catalog.unnest per array). */
const FLOW_ARRAYS = [
  '$1::text[]',
  '$2::text[]',
  '$3::text[]',
  '$4::int[]',
  '$5::timestamptz[]',
  '$6::bigint[]',
  '$7::int[]',
  '$8::text[]',
  '$9::int[]',
  '$10::int[]',
  '$11::text[]',
  '$12::int[]',
  '$13::boolean[]',
  '$19::text[]',
  '$20::text[]',
];

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
      SELECT t.*, pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('${s}.jobs', 'id')) AS id
      FROM ROWS FROM (${FLOW_ARRAYS.map((a) => `pg_catalog.unnest(${a})`).join(', ')})
           WITH ORDINALITY AS t(payload, queue, name, priority, run_at, delay_ms, max_attempts, backoff, timeout_ms,
                                parent, on_failure, pending, has_dependencies, trace, group_key, ord)
      ${durable ? `WHERE ${DURABLE}` : ''}
    ), ins AS (
      INSERT INTO ${s}.jobs (id, queue, name, payload, state, priority, run_at, max_attempts, backoff, timeout_ms,
                             pending_dependencies, has_dependents, has_dependencies, trace, group_key)
      OVERRIDING SYSTEM VALUE
      SELECT id, queue, name, payload::jsonb, CASE WHEN pending > 0 THEN 'waiting-children' ELSE 'waiting' END,
             priority, coalesce(run_at, now() + delay_ms::float8 * interval '1 millisecond'), max_attempts, backoff::jsonb,
             timeout_ms, pending, parent > 0, has_dependencies, trace::jsonb, group_key
      FROM input ORDER BY ord
      RETURNING id, queue, run_at, state
    ), edges AS (
      INSERT INTO ${s}.job_dependencies (child_id, parent_id, on_failure, state, resolved_at)
      SELECT c.id, p.id, c.on_failure, NULL, NULL FROM input c JOIN input p ON p.ord = c.parent
      UNION ALL
      SELECT e.child_id, p.id, e.on_failure, e.state, CASE WHEN e.state IS NULL THEN NULL ELSE now() END
      FROM ROWS FROM (pg_catalog.unnest($14::int[]), pg_catalog.unnest($15::bigint[]), pg_catalog.unnest($16::text[]),
                      pg_catalog.unnest($17::text[])) AS e(parent, child_id, on_failure, state)
      JOIN input p ON p.ord = e.parent
      RETURNING 1
    ), wake AS (
      SELECT pg_catalog.pg_notify($18, queue || '|' || greatest(0, pg_catalog.ceil(extract(epoch FROM pg_catalog.min(run_at) - now())::float8 * 1000::float8))::bigint::text)
      FROM ins WHERE state = 'waiting' GROUP BY queue
    )
    SELECT (SELECT coalesce(pg_catalog.array_agg(id::text ORDER BY ord), '{}') FROM input) AS ids,
           now() AS now,
           (SELECT count(*) FROM edges)::int AS edges, (SELECT count(*) FROM wake)::int AS woken`;
}

/** The insert of flows and of jobs with dependencies (migration 0008). */
export class FlowInserts {
  private readonly q: ReturnType<typeof flowInsertStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = flowInsertStatements(ctx.sql);
  }

  /**
   * Inserts a flow (or a job with dependencies): in the caller's transaction when `db` is one,
   * else on the pool, in a transaction of its own when existing jobs must be locked first.
   */
  async insertFlow(
    nodes: readonly FlowNodeRow[],
    existing: readonly ExistingDependency[],
    db: SqlExecutor | undefined,
  ): Promise<FlowInserted> {
    if (db && db !== this.ctx.db) return this.insert(nodes, existing, db, false);
    if (existing.length === 0) return this.insert(nodes, existing, this.ctx.db, true);
    return this.ctx.transaction((client) => this.insert(nodes, existing, clientExecutor(client), true));
  }

  /**
   * Inserts the nodes and their edges in one statement, after locking the existing jobs they
   * depend on (one more statement, and a third only when some dependency is not live). Throws
   * DependencyError before inserting anything for an unknown dependency, or a failed or
   * cancelled one whose policy is 'fail-parent'. Run it in a transaction (the caller's, or the
   * one `insertFlow` opens): the lock must be held until the insert commits.
   */
  async insert(
    nodes: readonly FlowNodeRow[],
    existing: readonly ExistingDependency[],
    db: SqlExecutor,
    durable: boolean,
  ): Promise<FlowInserted> {
    const ext = existing.length ? await this.existingEdges(existing, db) : [];
    // pending_dependencies: what the 0008 trigger counts down as each child leaves the jobs table.
    const children = new Array<number>(nodes.length).fill(0);
    for (const n of nodes) if (n.parent >= 0) children[n.parent]++;
    const hasDeps = nodes.map((_, i) => children[i] > 0);
    for (const e of ext) {
      hasDeps[e.node] = true;
      if (e.state === null) children[e.node]++;
    }
    const rows = nodes.map((n) => n.row);
    const [out] = await db.query<{ ids: string[]; now: Date }>(buildFlowInsert(this.ctx.schema, durable), [
      rows.map((r) => r.payloadJson),
      rows.map((r) => r.queue),
      rows.map((r) => r.name),
      rows.map((r) => r.priority),
      rows.map((r) => r.runAt),
      rows.map((r) => r.delayMs),
      rows.map((r) => r.maxAttempts),
      rows.map((r) => (r.backoff ? JSON.stringify(r.backoff) : null)),
      rows.map((r) => r.timeoutMs),
      nodes.map((n) => n.parent + 1),
      nodes.map((n) => n.onFailure),
      children,
      hasDeps,
      ext.map((e) => e.node + 1),
      ext.map((e) => e.id),
      ext.map((e) => e.onFailure),
      ext.map((e) => e.state),
      this.ctx.channel,
      rows.map((r) => r.traceJson),
      rows.map((r) => r.group),
    ]);
    return { ids: out.ids, now: new Date(out.now), waitingChildren: children.map((c) => c > 0) };
  }

  /**
   * Locks the live ones among the existing jobs depended on, and reads how the others ended.
   * Throws DependencyError for an unknown one, or a failed or cancelled one whose policy is
   * 'fail-parent'.
   */
  private async existingEdges(existing: readonly ExistingDependency[], db: SqlExecutor): Promise<ExistingEdge[]> {
    const ext: ExistingEdge[] = [];
    const ids = [...new Set(existing.map((e) => e.id))];
    const live = new Set((await db.query<{ id: string }>(this.q.lockDependencies, [ids])).map((r) => r.id));
    const gone = ids.filter((id) => !live.has(id));
    const finished = new Map<string, string>();
    if (gone.length) {
      for (const r of await db.query<{ id: string; state: string }>(this.q.finishedDependencies, [gone])) {
        finished.set(r.id, r.state);
      }
    }
    for (const e of existing) {
      if (live.has(e.id)) {
        ext.push({ ...e, state: null });
        continue;
      }
      const state = finished.get(e.id);
      if (state === undefined) {
        throw new DependencyError(
          e.id,
          'unknown',
          `dependsOn names job ${e.id}, which is neither live nor in history (never enqueued, removed, or pruned after ` +
            `its retention). Nothing was stored; depend only on jobs that exist.`,
        );
      }
      if (state !== 'completed' && e.onFailure === 'fail-parent') {
        throw new DependencyError(
          e.id,
          state as 'failed' | 'cancelled',
          `dependsOn names job ${e.id}, which already ended ${state}, so this job could never run (its onFailure is ` +
            `'fail-parent'). Nothing was stored. Retry job ${e.id} first, or pass { id: '${e.id}', onFailure: 'ignore' }.`,
        );
      }
      ext.push({ ...e, state });
    }
    return ext;
  }
}
