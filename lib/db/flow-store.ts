import type { ChildFailurePolicy, ChildResult, JobAttemptError, JobFlow } from '../core/job';
import { DependencyError } from '../core/errors';
import type { SqlExecutor } from './executor';
import { buildFlowInsert, buildFlowQueries, type FlowQueries } from './flow-queries';
import type { NewJobRow } from './job-store';

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

/**
 * Flows and dependencies: the insert of a tree (or of a job with dependencies on existing
 * ones), a parent's children, and a job's place in a flow. No code here releases a parent: the
 * trigger `jobs_release_dependents` (function `job_left_live_table()`, migrations/0008_flows.sql)
 * does, in the statement that finishes each child (marks the edge, fails or frees the parent).
 */
export class FlowStore {
  readonly q: FlowQueries;

  constructor(
    private readonly schema: string,
    private readonly channel: string,
    private readonly db: SqlExecutor,
  ) {
    this.q = buildFlowQueries(schema);
  }

  /**
   * Inserts the nodes and their edges in one statement, after locking the existing jobs they
   * depend on (one more statement, and a third only when some dependency is not live). Throws
   * DependencyError before inserting anything for an unknown dependency, or a failed or
   * cancelled one whose policy is 'fail-parent'. Run it in a transaction (the caller's, or the
   * one `insertFlow` callers open): the lock must be held until the insert commits.
   */
  async insert(
    nodes: readonly FlowNodeRow[],
    existing: readonly ExistingDependency[],
    db: SqlExecutor,
    durable: boolean,
  ): Promise<FlowInserted> {
    const ext: { node: number; id: string; onFailure: ChildFailurePolicy; state: string | null }[] = [];
    if (existing.length) {
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
    }
    // pending_dependencies: what the 0008 trigger counts down as each child leaves the jobs table.
    const children = new Array<number>(nodes.length).fill(0);
    for (const n of nodes) if (n.parent >= 0) children[n.parent]++;
    const hasDeps = nodes.map((_, i) => children[i] > 0);
    for (const e of ext) {
      hasDeps[e.node] = true;
      if (e.state === null) children[e.node]++;
    }
    const rows = nodes.map((n) => n.row);
    const [out] = await db.query<{ ids: string[]; now: Date }>(buildFlowInsert(this.schema, durable), [
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
      this.channel,
      rows.map((r) => r.traceJson),
    ]);
    return { ids: out.ids, now: new Date(out.now), waitingChildren: children.map((c) => c > 0) };
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
    // pruned per-child form (history-by-id.ts): for a 10,000-child fan-in that form was costed past
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
