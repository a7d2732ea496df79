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

  /** The stored value of each queue that has one. */
  async globalConcurrencies(queues: readonly string[]): Promise<Map<string, number>> {
    if (queues.length === 0) return new Map();
    const rows = await this.ctx.db.query<{ name: string; global_concurrency: number }>(this.q.globalConcurrencies, [queues]);
    return new Map(rows.map((r) => [r.name, r.global_concurrency]));
  }
}
