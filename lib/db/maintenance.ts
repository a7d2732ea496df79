import type { StalledJob } from '../core/events';
import type { PgPoolClient } from '../core/pg-types';
import { clientExecutor } from './executor';
import { publishCte, publishRef } from './events';
import { ARCHIVE_COLS } from './job-row';
import { advisoryLockHolders } from './lock-holders';
import type { SchemaSql, StoreContext } from './store-context';
import { lockKey } from './transaction';
import { stepStatements } from './steps';
import { queuePruneSql, type PruneClass } from './queue-retention';

/**
 * The error recorded when a lease runs out: the worker died, or its event loop stalled. (An
 * active row without a lease was written by hand: the library sets both in one statement.)
 */
const LEASE_ERROR = `pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
  'attempt', j.attempt, 'name', 'LeaseExpiredError', 'at', now(), 'worker', j.locked_by,
  'message', CASE WHEN j.locked_until IS NULL
    THEN 'Job was active without a lease (locked_until is NULL, so no worker renews it); handed back to the queue.'
    ELSE 'Lease expired at ' || j.locked_until::text || ' while worker ' || coalesce(j.locked_by, '?') ||
         ' held the job (it died, was killed, or stalled longer than leaseMs).' END))`;

/** The batched retention delete on one table of the history (`prune` and its variants). */
function pruneSql(table: string): string {
  return `
      DELETE FROM ${table} WHERE id IN (
        SELECT id FROM ${table}
        WHERE (state = 'completed' AND finished_at < now() - $1::bigint::float8 * interval '1 millisecond')
           OR (state = 'cancelled' AND finished_at < now() - $3::bigint::float8 * interval '1 millisecond')
           OR (state = 'failed' AND finished_at < now() - $4::bigint::float8 * interval '1 millisecond')
        LIMIT $2)`;
}

/** The maintenance pass's statements: the election, the rescue of stalled jobs, retention, and registry upkeep. */
export function maintenanceStatements(sql: SchemaSql) {
  const { s, jobs, history } = sql;
  const deps = `${s}.job_dependencies`;
  return {
    /** Maintenance runs on one node at a time: this transaction-scoped lock elects it. $1 key */
    tryMaintenanceLock: `SELECT pg_catalog.pg_try_advisory_xact_lock($1::bigint) AS locked`,

    /**
     * The rescuer: jobs whose lease expired go back to waiting (the attempt counts) or, after
     * their last attempt, to history as failed, with the lease error recorded. A NULL lease
     * counts as expired: nothing would ever renew it, and the job would stay active for good.
     * Every rescued job is published `stalled` (and the ones out of attempts `failed` too), in
     * the maintenance transaction, so on its commit. $1 batch size $2 channel
     */
    rescue: `
      WITH expired AS (
        SELECT id FROM ${jobs} WHERE state = 'active' AND (locked_until < now() OR locked_until IS NULL)
        ORDER BY locked_until LIMIT $1 FOR UPDATE SKIP LOCKED
      ), retried AS (
        UPDATE ${jobs} j
        SET state = 'waiting', locked_by = NULL, locked_until = NULL, run_at = now(),
            errors = j.errors || ${LEASE_ERROR}
        FROM expired e WHERE j.id = e.id AND j.attempt < j.max_attempts
        RETURNING j.id, j.queue, j.name, j.attempt
      ), dead AS (
        DELETE FROM ${jobs} j USING expired e
        WHERE j.id = e.id AND j.attempt >= j.max_attempts
        RETURNING j.*, ${LEASE_ERROR} AS err
      ), archived AS (
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'failed', priority, run_at, attempt, max_attempts, backoff,
               timeout_ms, errors || err, NULL, created_at, started_at, now(), locked_by, progress, trace, logs, unique_key, group_key
        FROM dead RETURNING id, queue, name, attempt
      ), wake AS (SELECT pg_catalog.pg_notify($2, queue || '|0') FROM retried GROUP BY queue),
      rescued AS (SELECT id, queue, attempt FROM retried UNION ALL SELECT id, queue, attempt FROM archived)${publishCte(sql, 'stalled', 'rescued', 'pub_stalled')}${publishCte(sql, 'failed', 'archived', 'pub_failed')}
      SELECT id, queue, name, attempt, true AS retried, (SELECT count(*) FROM wake) AS woken,
             ${publishRef(sql, 'pub_stalled')} + ${publishRef(sql, 'pub_failed')} AS published FROM retried
      UNION ALL
      SELECT id, queue, name, attempt, false, 0, ${publishRef(sql, 'pub_stalled')} + ${publishRef(sql, 'pub_failed')} FROM archived`,

    /**
     * Deletes finished jobs past their state's retention, a small batch at a time (three ranges
     * of the (state, finished_at) index of the failed, default and pre-version-10 tables; the
     * ranged partitions have only a BRIN index on finished_at since migration 11, and their rows
     * are in finish order), over the whole history: for failed jobs, and for a state
     * whose retention is shorter than a partition (lib/db/history/partitions.ts drops the rest
     * whole). $1 completed ms (NULL: none deleted) $2 batch $3 cancelled ms (NULL: none)
     * $4 failed ms (NULL: kept for ever)
     */
    prune: pruneSql(history),
    /** The same, on the pre-version-10 history table only (rows older than the partitions). */
    pruneLegacy: pruneSql(`${s}.job_history_legacy`),
    /** The same, on the default partition only (rows that finished while no partition was there). */
    pruneDoneDefault: pruneSql(`${s}.job_history_done_default`),
    /** Which partitioned layout the history has (migrations/0010_history_partitions.sql). No parameters. */
    historyLayout: `
      SELECT pg_catalog.to_regclass('${s}.job_history_current') IS NOT NULL AS current,
             pg_catalog.to_regclass('${s}.job_history_legacy') IS NOT NULL AS legacy`,

    /**
     * Maintenance: drops nodes not seen for 10 of their own heartbeat intervals (killed, or cut
     * off from the database). The dashboard already hides them after 3. No parameters.
     */
    pruneNodes: `DELETE FROM ${s}.nodes WHERE last_seen_at < now() - (10 * heartbeat_ms)::float8 * interval '1 millisecond'`,

    /**
     * Maintenance: deduplication keys whose window is over (migration 13), a batch at a time on
     * job_dedup_expires_idx, oldest first. An expired row blocks no add (the add takes it over),
     * so this only keeps the table small; never on the add's path. $1 batch
     */
    pruneDedup: `
      DELETE FROM ${s}.job_dedup WHERE (queue, key) IN (
        SELECT queue, key FROM ${s}.job_dedup WHERE expires_at <= now() ORDER BY expires_at LIMIT $1)`,

    /**
     * Maintenance: the edges of parents that finished longer ago than the shortest retention
     * and are in neither table any more (pruned or removed), a batch at a time, oldest first.
     * $1 ms $2 batch
     */
    pruneDependencies: `
      DELETE FROM ${deps} WHERE (child_id, parent_id) IN (
        SELECT d.child_id, d.parent_id FROM ${deps} d
        WHERE d.parent_finished_at < now() - $1::bigint::float8 * interval '1 millisecond'
          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.id = d.parent_id)
          AND NOT EXISTS (SELECT 1 FROM ${history} h WHERE h.id = d.parent_id)
        ORDER BY d.parent_finished_at
        LIMIT $2)`,
  };
}

/** The maintenance pass, on one node at a time. */
export class Maintenance {
  private readonly q: ReturnType<typeof maintenanceStatements>;
  /** The per-queue variants of the prune statements (queuePruneSql), by table and scope. */
  private readonly byQueue = new Map<string, string>();

  private readonly sweepSteps: string;

  constructor(private readonly ctx: StoreContext) {
    this.q = maintenanceStatements(ctx.sql);
    this.sweepSteps = stepStatements(ctx.sql).sweepOrphans;
  }

  /**
   * One maintenance pass, on one node at a time (a transaction-scoped advisory lock elects it,
   * which also works through PgBouncer in transaction mode). Returns null when another node has it.
   * Any role that can connect may take that key as well, and maintenance then stopped with no
   * word: when the holder is not a node of this app (another role or application_name), the
   * store's warnings name it (rate-limited). A try-lock keeps the pass from ever waiting.
   */
  async maintain(batch: number): Promise<{ stalled: StalledJob[]; pruned: number } | null> {
    const key = lockKey(`nestjs-pg-queue:maintenance:${this.ctx.schema}`);
    return this.ctx.transaction(async (client) => {
      const { rows } = await client.query<{ locked: boolean }>(this.q.tryMaintenanceLock, [key]);
      if (!rows[0].locked) {
        const holders = await advisoryLockHolders(clientExecutor(client), key);
        this.ctx.foreignLocks.report('maintenance', holders, 'the maintenance pass (rescue of expired leases, retention)');
        return null;
      }
      const r = await client.query<{ id: string; queue: string; name: string; attempt: number; retried: boolean }>(
        this.q.rescue,
        [batch, this.ctx.channel],
      );
      const pruned = await this.pruneHistory(client, batch);
      await client.query(this.q.pruneNodes);
      await client.query(this.q.pruneDedup, [batch]);
      // Edges of flows whose parent is gone from both tables, past the shortest retention.
      await client.query(this.q.pruneDependencies, [this.ctx.retentions.shortestMs, batch]);
      // Steps of jobs gone from both tables (migration 0018), past the shortest retention.
      await client.query(this.sweepSteps, [this.ctx.retentions.shortestMs, batch]);
      return {
        stalled: r.rows.map((x) => ({
          id: String(x.id),
          queue: x.queue,
          name: x.name,
          attempt: x.attempt,
          willRetry: x.retried,
        })),
        pruned,
      };
    });
  }

  /**
   * The batched part of retention (the partitions wholly past it are dropped instead, by
   * HistoryPartitions), one class of queues at a time (queue-retention.ts, pruneClasses): the
   * module's retention for every queue without its own, then each queue with its own. Completed
   * and cancelled jobs are deleted row by row only where no partition drop will take them in
   * time: in the pre-version-10 table and the default partition, and everywhere for a state whose
   * retention is shorter than a partition or than the longest retention of the database. Failed
   * jobs, which live in their own partition, are always deleted row by row (retention.failedMs).
   * One batch per class and table per pass, each a short statement of the maintenance transaction.
   */
  private async pruneHistory(client: PgPoolClient, batch: number): Promise<number> {
    const [layout] = (await client.query<{ current: boolean; legacy: boolean }>(this.q.historyLayout)).rows;
    let n = 0;
    for (const c of this.ctx.retentions.plan(this.ctx.historyPartitionMs)) {
      const on = (table: 'history' | 'legacy' | 'default') => this.pruneStatement(table, c);
      const scope = c.queue ?? c.except;
      const { rowByRow: r, rest } = c;
      if (!layout.current) {
        // The history from before version 10, not converted yet: every state row by row, as it always was.
        const all = [r.completed ?? rest.completed, batch, r.cancelled ?? rest.cancelled, r.failed];
        n += (await client.query(on('history'), c.queue === null && !c.except.length ? all : [...all, scope])).rowCount ?? 0;
        continue;
      }
      const params = (p: unknown[]) => (c.queue === null && !c.except.length ? p : [...p, scope]);
      if (r.completed !== null || r.cancelled !== null || r.failed !== null) {
        n += (await client.query(on('history'), params([r.completed, batch, r.cancelled, r.failed]))).rowCount ?? 0;
      }
      if (rest.completed !== null || rest.cancelled !== null) {
        const p = params([rest.completed, batch, rest.cancelled, null]);
        if (layout.legacy) n += (await client.query(on('legacy'), p)).rowCount ?? 0;
        n += (await client.query(on('default'), p)).rowCount ?? 0;
      }
    }
    return n;
  }

  /** The statement of one class on one table: the module's own when no queue has its own retention. */
  private pruneStatement(table: 'history' | 'legacy' | 'default', c: PruneClass): string {
    if (c.queue === null && !c.except.length) {
      return table === 'history' ? this.q.prune : table === 'legacy' ? this.q.pruneLegacy : this.q.pruneDoneDefault;
    }
    const scope = c.queue === null ? 'others' : 'queue';
    const key = `${table}:${scope}`;
    let sql = this.byQueue.get(key);
    if (!sql) {
      const { s, history } = this.ctx.sql;
      const t = table === 'history' ? history : table === 'legacy' ? `${s}.job_history_legacy` : `${s}.job_history_done_default`;
      this.byQueue.set(key, (sql = queuePruneSql(t, scope)));
    }
    return sql;
  }
}
