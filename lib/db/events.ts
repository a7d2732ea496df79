import type { QueueEventKind } from '../core/queue-events';
import { HISTORY_COLS, LIVE_COLS, type JobRow } from './job-row';
import type { SqlExecutor } from './executor';
import type { SchemaSql } from './store-context';

export { eventsChannel } from './events-channel';

/**
 * Entries per notification. An entry is `id.attempt,` (a bigint has at most 19 digits, an
 * attempt at most 10): 31 bytes at worst, so 200 of them and the longest queue name stay under
 * NOTIFY's 8000-byte payload limit (6,200 + 1 + kind + 1 + queue).
 */
export const EVENTS_PER_NOTIFICATION = 200;

/**
 * The CTE that publishes the rows of `from` (columns id, queue, attempt) as `kind` events: one
 * notification per queue and EVENTS_PER_NOTIFICATION rows, `kind|queue|id.attempt,id.attempt`.
 * pg_notify in the statement that wrote the rows: PostgreSQL delivers it on commit only, so a
 * listener never hears of an outcome that did not commit. The CTE runs only if the statement
 * reads it: `publishRef` is that read. Empty when publishing is off (`sql.events` null).
 */
export function publishCte(sql: SchemaSql, kind: QueueEventKind, from: string, name = 'published'): string {
  if (sql.events === null) return '';
  return `, ${name} AS (
        SELECT pg_catalog.pg_notify(${sql.events}, '${kind}|' || queue || '|' || pg_catalog.string_agg(id::text || '.' || attempt::text, ','))
        FROM (SELECT id, queue, attempt, (pg_catalog.row_number() OVER (PARTITION BY queue) - 1) / ${EVENTS_PER_NOTIFICATION} AS chunk
              FROM ${from}) x
        GROUP BY queue, chunk)`;
}

/** The read that makes a `publishCte` run: a column of the statement's answer (0 rows when off). */
export function publishRef(sql: SchemaSql, name = 'published'): string {
  return sql.events === null ? '0' : `(SELECT count(*) FROM ${name})`;
}

/** A job row as the confirming read returns it: the live or history row, and where it was found. */
export interface ConfirmRow extends JobRow {
  /** true: in the jobs table (live); false: in history. */
  live: boolean;
  /**
   * The job waited on dependencies and they all ended before it left `waiting-children` (what a
   * `released` event says); false for a job that had none, still waits, or was failed by a child.
   */
  released: boolean;
}

/** The statement of the events' listener: its confirming read. */
export function eventStatements({ s, jobs, history }: SchemaSql) {
  return {
    /**
     * The listener's one read per burst: every row the notifications named, live or in history,
     * so an event fires only for what the database says (a notification is a hint: any role that
     * can connect may send one). By id on both tables (the primary key; on a partitioned history
     * an index probe per partition, once per burst, not per event). $1 id[]
     *
     * `released`, for a flow parent's release (migration 0016): live, a job with dependencies
     * past waiting-children; finished, one whose every edge ended in a way that does not fail
     * it, before it finished (a parent cancelled while it waited, whose children ended later,
     * was never released). Only for a finished job that has dependencies (has_dependencies
     * stays on the live row; history rows are probed on job_dependencies_parent_idx, which
     * holds no edge for a job without dependencies: one index probe, no heap read).
     */
    confirm: `
      SELECT true AS live, ${LIVE_COLS}, (has_dependencies AND state <> 'waiting-children') AS released
      FROM ${jobs} WHERE id = ANY($1::bigint[])
      UNION ALL
      SELECT false, ${HISTORY_COLS},
             COALESCE((SELECT pg_catalog.bool_and(d.state IS NOT NULL AND (d.state = 'completed' OR d.on_failure = 'ignore')
                                                  AND d.resolved_at <= d.parent_finished_at)
                       FROM ${s}.job_dependencies d WHERE d.parent_id = h.id), false)
      FROM ${history} h WHERE h.id = ANY($1::bigint[])`,
  };
}

/** The events' read, on one schema. */
export class EventStore {
  private readonly q: ReturnType<typeof eventStatements>;

  constructor(
    private readonly db: SqlExecutor,
    sql: SchemaSql,
    /** The events channel, unquoted. */
    readonly channel: string,
  ) {
    this.q = eventStatements(sql);
  }

  /** The rows of `ids` as they are now, live and finished (a job moving between reads may show in both). */
  confirm(ids: readonly string[]): Promise<ConfirmRow[]> {
    return this.db.query<ConfirmRow>(this.q.confirm, [`{${ids.join(',')}}`]);
  }
}
