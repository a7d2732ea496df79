import type { SchemaSql, StoreContext } from './store-context';

/** A queue's global concurrency stored in its `queues` row (migration 0015): set, removed, read. */
export function queueLimitStatements({ s }: SchemaSql) {
  return {
    /**
     * queue.setGlobalConcurrency(n) (n NULL: removeGlobalConcurrency). NOTIFY '!limits|queue'
     * rides in the same statement, so it fires on commit; nodes take it as a hint and read the
     * row (any role that can connect may NOTIFY). $1 queue $2 n or NULL $3 channel
     */
    setGlobalConcurrency: `
      WITH up AS (
        INSERT INTO ${s}.queues (name, global_concurrency) VALUES ($1, $2::int) ON CONFLICT (name)
        DO UPDATE SET global_concurrency = EXCLUDED.global_concurrency, updated_at = now() RETURNING name
      )
      SELECT pg_catalog.pg_notify($3, '!limits|' || name) FROM up`,

    /**
     * The stored values of these queues (one primary-key probe each); a queue without a row or
     * with NULL has none. $1 queue[]
     */
    globalConcurrencies: `SELECT name, global_concurrency FROM ${s}.queues WHERE name = ANY($1::text[]) AND global_concurrency IS NOT NULL`,

    /**
     * What a node reads: its queues' stored global values, and the concurrency the dashboard
     * asked of this node per queue (its own nodes row; {} before its first heartbeat). $1 queue[] $2 node id
     */
    limitsOfNode: `
      SELECT coalesce((SELECT pg_catalog.jsonb_object_agg(name, global_concurrency) FROM ${s}.queues
                        WHERE name = ANY($1::text[]) AND global_concurrency IS NOT NULL), '{}') AS global,
             coalesce((SELECT desired_concurrency FROM ${s}.nodes WHERE id = $2), '{}') AS desired`,

    /**
     * The dashboard asks a live node to run $3 jobs of queue $2 at once; NOTIFY '!limits|queue' on
     * commit. No row: the node is not (or no longer) in the registry. $1 node id $4 channel
     */
    setNodeConcurrency: `
      WITH up AS (
        UPDATE ${s}.nodes SET desired_concurrency = desired_concurrency || pg_catalog.jsonb_build_object($2::text, $3::int)
        WHERE id = $1 RETURNING id
      )
      SELECT pg_catalog.pg_notify($4, '!limits|' || $2::text) FROM up`,
  };
}

/** The stored global concurrency of queues (the option's runtime counterpart). */
export class QueueLimits {
  private readonly q: ReturnType<typeof queueLimitStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = queueLimitStatements(ctx.sql);
  }

  /** Stores `n` (null: removes it) and tells every node, on commit. */
  async setGlobalConcurrency(queue: string, n: number | null): Promise<void> {
    await this.ctx.db.query(this.q.setGlobalConcurrency, [queue, n, this.ctx.channel]);
  }

  /**
   * A node's reading (stored-limits.ts): the stored global value of each of `queues` that has
   * one, and the concurrency asked of node `workerId` per queue (whole numbers from 1 to 1000 only:
   * anything else in the row is ignored).
   */
  async limitsOfNode(
    queues: readonly string[],
    workerId: string,
  ): Promise<{ global: Map<string, number>; desired: Map<string, number> }> {
    const [r] = await this.ctx.db.query<{ global: Record<string, number>; desired: Record<string, unknown> }>(
      this.q.limitsOfNode,
      [queues, workerId],
    );
    const desired = new Map<string, number>();
    for (const [queue, n] of Object.entries(r.desired ?? {})) {
      if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 1000) desired.set(queue, n);
    }
    return { global: new Map(Object.entries(r.global ?? {})), desired };
  }

  /** Asks live node `nodeId` to run `n` jobs of `queue` at once; false when no such node is registered. */
  async setNodeConcurrency(nodeId: string, queue: string, n: number): Promise<boolean> {
    const rows = await this.ctx.db.query(this.q.setNodeConcurrency, [nodeId, queue, n, this.ctx.channel]);
    return rows.length > 0;
  }

  /** The stored value of each queue that has one. */
  async globalConcurrencies(queues: readonly string[]): Promise<Map<string, number>> {
    if (queues.length === 0) return new Map();
    const rows = await this.ctx.db.query<{ name: string; global_concurrency: number }>(this.q.globalConcurrencies, [queues]);
    return new Map(rows.map((r) => [r.name, r.global_concurrency]));
  }
}
