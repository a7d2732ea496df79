import type { ClaimedRow } from './claim';
import type { SchemaSql, StoreContext } from './store-context';

/**
 * Groups visited by one grouped claim at most, in a queue with per-group limits. Each visited
 * group then holds a transaction-scoped advisory lock until the claim commits, and those share
 * PostgreSQL's lock table (max_locks_per_transaction x max_connections slots, 64 x 100 by
 * default): 32 leaves room for many nodes claiming at once. The next claim goes on from where
 * this one stopped.
 */
export const MAX_GROUPS_PER_CLAIM = 32;
/** The same without limits (fair turns only): no lock is taken, so a claim may visit more groups. */
export const MAX_GROUPS_PER_CLAIM_UNLIMITED = 128;

/** A grouped queue's settings, as the claim takes them (registerQueue({ group })). */
export interface GroupClaimSettings {
  readonly concurrency: number | null;
  readonly fifo: boolean;
  readonly limiter: { readonly max: number; readonly durationMs: number } | null;
}

/** The grouped claim and the per-group stored settings (migration 0017), for one schema. */
export function groupedClaimStatements({ s, ack }: SchemaSql) {
  return {
    /**
     * The claim of a grouped queue: claim_grouped() (migrations/0017_groups.sql) does the work
     * in one round trip. Fair turns: each claim goes on from the worker's cursor (the last group
     * it visited) in group_key order, wrapping once, and shares its slots equally between the
     * groups it visits (a group with fewer due jobs than its share leaves the rest to the
     * others); within a group, the queue's order (priority, run_at, id). Per group, the running
     * count, the stored override and the rate window are read after the group's try-lock, so
     * they see what the previous holder committed; a group locked by another node's claim is
     * skipped, never waited for. The same columns as the plain claim (claim.ts), plus the group.
     * $1 queue $2 limit $3 worker id $4 lease ms $5 cursor $6 concurrency $7 fifo $8 rate max
     * $9 rate window ms $10 groups per claim $11 give jobs without a group a turn
     */
    claim: `
      SELECT c.*
      FROM ${s}.claim_grouped($1::text, $2::int, $3::text, $4::float8, $5::text, $6::int, $7::boolean, $8::int,
                              $9::bigint, $10::int, $11::boolean) c WHERE true ${ack}`,

    /**
     * queue.setGroupConcurrency(group, n) (n NULL: removeGroupConcurrency). The claim reads it
     * under the group's lock: no hint is needed, the next claim of any node applies it. A row
     * left with neither a value nor a rate window is deleted (it holds no job). $1 queue $2 group $3 n
     */
    setConcurrency: `
      INSERT INTO ${s}.job_groups AS g (queue, group_key, concurrency) VALUES ($1, $2, $3::int)
      ON CONFLICT (queue, group_key) DO UPDATE SET concurrency = EXCLUDED.concurrency`,
    removeConcurrency: `
      WITH u AS (UPDATE ${s}.job_groups SET concurrency = NULL WHERE queue = $1 AND group_key = $2 RETURNING queue, group_key, recent_starts)
      DELETE FROM ${s}.job_groups g USING u
      WHERE g.queue = u.queue AND g.group_key = u.group_key AND pg_catalog.cardinality(u.recent_starts) = 0`,
    /** $1 queue $2 group */
    getConcurrency: `SELECT concurrency FROM ${s}.job_groups WHERE queue = $1 AND group_key = $2`,
  };
}

/** A row of the grouped claim: a claimed job (id set), or the cursor alone when nothing was claimed. */
interface GroupedRow extends Omit<ClaimedRow, 'id'> {
  id: string | null;
  next_cursor: string | null;
  group_key: string | null;
}

/** Claims of grouped queues, and the per-group stored concurrency. */
export class GroupedClaims {
  private readonly q: ReturnType<typeof groupedClaimStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = groupedClaimStatements(ctx.sql);
  }

  /**
   * Claims up to `limit` jobs of a grouped queue, taking turns between groups from `cursor`
   * on; returns the rows and the cursor to send next time.
   */
  async claim(
    queue: string,
    limit: number,
    workerId: string,
    leaseMs: number,
    cursor: string | null,
    settings: GroupClaimSettings,
    ungrouped: boolean,
  ): Promise<{ rows: ClaimedRow[]; cursor: string | null }> {
    const out = await this.ctx.db.query<GroupedRow>(
      this.q.claim,
      [
        queue,
        limit,
        workerId,
        leaseMs,
        cursor,
        settings.concurrency,
        settings.fifo,
        settings.limiter?.max ?? null,
        settings.limiter?.durationMs ?? null,
        settings.concurrency === null && !settings.fifo && !settings.limiter
          ? MAX_GROUPS_PER_CLAIM_UNLIMITED
          : MAX_GROUPS_PER_CLAIM,
        ungrouped,
      ],
      this.ctx.name(this.q.claim),
    );
    const rows: ClaimedRow[] = [];
    for (const r of out) if (r.id !== null) rows.push(r as ClaimedRow);
    return { rows, cursor: out[0]?.next_cursor ?? cursor };
  }

  /** Stores group `group`'s concurrency (null: removes it, and the queue's group.concurrency applies again). */
  async setConcurrency(queue: string, group: string, n: number | null): Promise<void> {
    await this.ctx.db.query(
      n === null ? this.q.removeConcurrency : this.q.setConcurrency,
      n === null ? [queue, group] : [queue, group, n],
    );
  }

  /** The stored concurrency of `group`, or null when none is stored. */
  async getConcurrency(queue: string, group: string): Promise<number | null> {
    const [r] = await this.ctx.db.query<{ concurrency: number | null }>(this.q.getConcurrency, [queue, group]);
    return r?.concurrency ?? null;
  }
}
