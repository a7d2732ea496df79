import type { SqlExecutor } from './executor';
import { isUndefinedTable, historyByIdParamSql, type HistoryLayout, type HistoryLayoutCache } from './history/by-id';
import { byLayout } from './job-row';
import type { SchemaSql, StoreContext } from './store-context';

/** New lines of one running attempt, as the worker's log buffer hands them over. */
export interface LogAppend {
  readonly id: string;
  readonly attempt: number;
  /** The lines, as a JSON array of strings. */
  readonly linesJson: string;
  /** Lines the worker dropped before writing (over the caps already): counted, not stored. */
  readonly dropped: number;
}

/** The caps of one job's log (module option `jobLogs`), enforced in the append statement. */
export interface LogCaps {
  readonly maxLines: number;
  readonly maxBytes: number;
}

/** One page of a job's log. */
export interface LogPage {
  readonly logs: string[];
  /** Lines stored for the job (all pages). */
  readonly count: number;
  /** Lines dropped over the caps (counted, never stored). */
  readonly dropped: number;
}

/** How the paging parameters follow the by-id lookup's: $2 for the flat form, $7 for the partitioned ones. */
const PAGE_AT: Readonly<Record<HistoryLayout, number>> = { flat: 2, partitioned: 7, 'partitioned-legacy': 7 };

/**
 * The statements of job logs (migrations/0012_job_logs.sql: the `logs` column of jobs and
 * job_history, `{"lines": [...], "bytes": n, "dropped": n}`).
 */
export function logStatements({ jobs, history, ack }: SchemaSql, schema: string) {
  const at = 'pg_catalog.array_position($1::bigint[], j.id)';
  // The page of one job's lines (1-based ordinality: lines offset+1 .. offset+limit). $q queue
  const page = (source: string, p: number) => `
      SELECT coalesce((SELECT pg_catalog.jsonb_agg(e.v ORDER BY e.n)
                       FROM pg_catalog.jsonb_array_elements(x.logs -> 'lines'::text) WITH ORDINALITY AS e(v, n)
                       WHERE e.n > $${p}::int AND e.n <= $${p}::int + $${p + 1}::int), '[]'::jsonb) AS logs,
             coalesce(pg_catalog.jsonb_array_length(x.logs -> 'lines'::text), 0) AS count,
             coalesce((x.logs ->> 'dropped'::text)::int, 0) AS dropped
      FROM (${source}) x
      WHERE $${p + 2}::text IS NULL OR x.queue = $${p + 2}::text
      LIMIT 1`;
  return {
    /**
     * Appends the buffered lines of running attempts, one statement for every job of a worker
     * with new lines. Guarded like an outcome: (id, attempt, locked_by) must still match, so a
     * worker that lost its lease writes nothing (a rescued job keeps what was written before).
     * The caps keep the first lines: a line is kept while the job holds fewer than $6 lines and
     * $7 bytes with it and nothing was dropped before; every other line is counted in `dropped`.
     * $1 id[] $2 attempt[] $3 lines[] (JSON arrays of strings) $4 dropped by the worker[] $5 worker
     * $6 maxLines $7 maxBytes
     */
    append: `
      UPDATE ${jobs} j SET logs = (
        SELECT pg_catalog.jsonb_build_object(
                 'lines', coalesce(j.logs -> 'lines'::text, '[]'::jsonb)
                          || coalesce(pg_catalog.jsonb_agg(l.v ORDER BY l.n) FILTER (WHERE l.keep), '[]'::jsonb),
                 'bytes', coalesce((j.logs ->> 'bytes'::text)::int, 0) + coalesce(pg_catalog.sum(l.b) FILTER (WHERE l.keep), 0)::int,
                 'dropped', coalesce((j.logs ->> 'dropped'::text)::int, 0) + ($4::int[])[${at}]
                            + (count(*) FILTER (WHERE NOT l.keep))::int)
        FROM (
          SELECT e.v, e.n, e.b,
                 coalesce((j.logs ->> 'dropped'::text)::int, 0) = 0
                 AND coalesce(pg_catalog.jsonb_array_length(j.logs -> 'lines'::text), 0)::bigint + e.n <= $6::bigint
                 AND coalesce((j.logs ->> 'bytes'::text)::int, 0)::bigint + pg_catalog.sum(e.b) OVER (ORDER BY e.n) <= $7::bigint AS keep
          FROM (SELECT t.v, t.n, pg_catalog.octet_length(t.v) AS b
                FROM pg_catalog.jsonb_array_elements_text((($3::text[])[${at}])::jsonb) WITH ORDINALITY AS t(v, n)) e
        ) l)
      WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $5 AND j.attempt = ($2::int[])[${at}] ${ack}
      RETURNING j.id`,

    /**
     * A page of one job's log, live or finished, for each history layout: the by-id lookup's
     * parameters first (history/by-id.ts), then offset, limit and the queue, or NULL: any (PAGE_AT).
     */
    pageIn: byLayout((layout) => {
      const p = PAGE_AT[layout];
      return layout === 'flat'
        ? page(
            `SELECT queue, logs FROM ${jobs} WHERE id = $1::bigint
             UNION ALL SELECT queue, logs FROM ${history} WHERE id = $1::bigint`,
            p,
          )
        : page(
            `SELECT queue, logs FROM ${jobs} WHERE id = $1::bigint
             UNION ALL ${historyByIdParamSql(schema, 'queue, logs', layout)}`,
            p,
          );
    }),
  };
}

/** Job logs: the worker's batched appends and the reads of one job's lines. */
export class JobLogs {
  private readonly q: ReturnType<typeof logStatements>;

  constructor(
    private readonly ctx: StoreContext,
    private readonly layout: HistoryLayoutCache,
  ) {
    this.q = logStatements(ctx.sql, ctx.schema);
  }

  /** Appends the lines of running attempts in one statement; returns the ids written (a lost lease writes nothing). */
  async append(list: readonly LogAppend[], workerId: string, caps: LogCaps): Promise<Set<string>> {
    const rows = await this.ctx.db.query<{ id: string }>(this.q.append, [
      list.map((a) => a.id),
      list.map((a) => a.attempt),
      list.map((a) => a.linesJson),
      list.map((a) => a.dropped),
      workerId,
      caps.maxLines,
      caps.maxBytes,
    ]);
    return new Set(rows.map((r) => String(r.id)));
  }

  /** Lines `offset + 1` to `offset + limit` of a job of `queue`, live or finished; null when there is none. */
  page(queue: string, id: string, offset: number, limit: number, db: SqlExecutor = this.ctx.db): Promise<LogPage | null> {
    return readLogPage(db, this.layout, this.q.pageIn, queue, id, offset, limit);
  }
}

/**
 * A page of the log of job `id` (of `queue`, or of any queue when null), in the statement for the
 * history's layout (the dashboard's store calls it with its own executor and layout cache).
 */
export async function readLogPage(
  db: SqlExecutor,
  layout: HistoryLayoutCache,
  pageIn: Readonly<Record<HistoryLayout, string>>,
  queue: string | null,
  id: string,
  offset: number,
  limit: number,
): Promise<LogPage | null> {
  const run = async (sql: string, values: unknown[]) =>
    db.query<{ logs: string[]; count: number; dropped: number }>(sql, [...values, offset, limit, queue]);
  let rows;
  try {
    const { sql, values } = await layout.lookup(pageIn, id);
    rows = await run(sql, values);
    if (!rows.length && sql !== pageIn.flat) rows = await run(pageIn.flat, [id]);
  } catch (err) {
    if (!isUndefinedTable(err)) throw err;
    layout.forget();
    rows = await run(pageIn.flat, [id]);
  }
  if (!rows.length) return null;
  const [r] = rows;
  return { logs: r.logs, count: r.count, dropped: r.dropped };
}
