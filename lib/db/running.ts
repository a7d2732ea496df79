import { bigintArrayText } from './batch-params';
import { publishCte, publishRef } from './events';
import type { SchemaSql, StoreContext } from './store-context';

/** What a node writes into the registry with each heartbeat. */
export interface NodeRow {
  readonly host: string;
  readonly pid: number;
  readonly startedAt: Date;
  readonly heartbeatMs: number;
  readonly queues: readonly { readonly name: string; readonly concurrency: number }[];
}

/** What a worker writes while its jobs run: leases, progress, the hand-back at shutdown, and its node's row. */
export function runningStatements(sql: SchemaSql) {
  const { s, jobs, ack } = sql;
  return {
    /**
     * job.updateProgress(): the latest progress of a running attempt, throttled by the worker to
     * one write per progressIntervalMs per job. Guarded like an outcome: (id, attempt, locked_by)
     * must still match, so a node that lost the lease changes nothing (0 rows). Not the claim's
     * hot path: only jobs whose handlers report progress run it. Published as a `progress` event
     * (the value is not in the notification: a listener reads it). $1 id $2 attempt $3 worker $4 progress
     */
    setProgressIfRunning: `
      WITH stored AS (
        UPDATE ${jobs} SET progress = $4::jsonb
        WHERE id = $1 AND locked_by = $3 AND attempt = $2 ${ack}
        RETURNING id, queue, attempt
      )${publishCte(sql, 'progress', 'stored')}
      SELECT id, ${publishRef(sql)} AS published FROM stored`,

    /**
     * Renews the leases of every job this worker runs and keeps its row in the nodes registry
     * fresh, in one statement (one round trip per heartbeat, as before the registry). A
     * data-modifying CTE runs to completion whether or not the UPDATE reads it. The upsert
     * touches one row of a table as small as the number of nodes.
     * $1 id[] $2 worker $3 lease ms $4 host $5 pid $6 started at $7 heartbeat ms $8 queues (JSON)
     */
    heartbeat: `
      WITH node AS (
        INSERT INTO ${s}.nodes (id, host, pid, started_at, last_seen_at, heartbeat_ms, queues)
        VALUES ($2, $4, $5, $6, now(), $7, $8::jsonb)
        ON CONFLICT (id) DO UPDATE SET last_seen_at = now(), heartbeat_ms = EXCLUDED.heartbeat_ms, queues = EXCLUDED.queues
      )
      UPDATE ${jobs} SET locked_until = now() + $3::float8 * interval '1 millisecond'
      WHERE id = ANY($1::bigint[]) AND locked_by = $2 ${ack}
      RETURNING id, cancel_requested_at IS NOT NULL AS cancel`,

    /** Clean shutdown: this node leaves the registry. $1 worker */
    removeNode: `DELETE FROM ${s}.nodes WHERE id = $1`,

    /** Nodes seen within 3 of their own heartbeat intervals (as the dashboard lists them), for health and metrics. */
    liveNodeIds: `SELECT id FROM ${s}.nodes WHERE last_seen_at > now() - (3 * heartbeat_ms)::float8 * interval '1 millisecond'`,

    /**
     * Shutdown: hands unfinished jobs back without counting the interrupted attempt, and rings
     * the doorbell so another worker takes them at once. run_at stays: it was due already (so the
     * job keeps its place at the head of the queue), and a recurring job's run_at is its tick.
     * The wake-up's due time is -1, not 0: that old run_at may lie outside a worker's claim
     * window (claimSince), so it asks for the catch-up claim; a node that predates the window reads
     * any due time <= 0 as "now". $1 id[] $2 worker $3 channel
     */
    handBack: `
      WITH back AS (
        UPDATE ${jobs} SET state = 'waiting', locked_by = NULL, locked_until = NULL,
               attempt = greatest(attempt - 1, 0)
        WHERE id = ANY($1::bigint[]) AND locked_by = $2 AND state = 'active'
        RETURNING id, queue
      ), wake AS (SELECT pg_catalog.pg_notify($3, queue || '|-1') FROM back GROUP BY queue)
      SELECT id, (SELECT count(*) FROM wake) AS woken FROM back`,
  };
}

/** The running jobs' writes of one worker process, on the queue's own pool. */
export class RunningJobs {
  private readonly q: ReturnType<typeof runningStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = runningStatements(ctx.sql);
  }

  /**
   * Stores a running attempt's progress; false when no row matched (the lease is no longer this
   * worker's, or the job already finished): nothing was changed then.
   */
  async setProgressIfRunning(id: string, attempt: number, workerId: string, progressJson: string): Promise<boolean> {
    const rows = await this.ctx.db.query(this.q.setProgressIfRunning, [id, attempt, workerId, progressJson]);
    return rows.length > 0;
  }

  /**
   * Renews leases and refreshes this node's row in the registry, in one statement; returns the
   * ids still held, and those of them whose cancel was asked.
   */
  async heartbeat(
    ids: readonly string[],
    workerId: string,
    leaseMs: number,
    node: NodeRow,
  ): Promise<{ kept: Set<string>; cancel: string[] }> {
    const rows = await this.ctx.db.query<{ id: string; cancel: boolean }>(
      this.q.heartbeat,
      [
        bigintArrayText(ids),
        workerId,
        leaseMs,
        node.host,
        node.pid,
        node.startedAt,
        node.heartbeatMs,
        JSON.stringify(node.queues),
      ],
      this.ctx.name(this.q.heartbeat),
    );
    return { kept: new Set(rows.map((r) => String(r.id))), cancel: rows.filter((r) => r.cancel).map((r) => String(r.id)) };
  }

  /** Removes this node from the registry (clean shutdown). */
  async removeNode(workerId: string): Promise<void> {
    await this.ctx.db.query(this.q.removeNode, [workerId]);
  }

  async handBack(ids: readonly string[], workerId: string): Promise<number> {
    if (ids.length === 0) return 0;
    return (await this.ctx.db.query(this.q.handBack, [ids, workerId, this.ctx.channel])).length;
  }

  /** The worker processes (nodes) that heartbeat into this schema now: seen within 3 of their intervals. */
  async liveNodeIds(): Promise<string[]> {
    return (await this.ctx.db.query<{ id: string }>(this.q.liveNodeIds, [])).map((r) => r.id);
  }
}
