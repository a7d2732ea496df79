import { attemptParams, bigintArrayText, resultsByIdJson } from './batch-params';
import type { SqlExecutor } from './executor';
import { publishCte, publishRef } from './events';
import { epochMs } from './claim';
import { ARCHIVE_COLS } from './job-row';
import type { SchemaSql, StoreContext } from './store-context';

/** The outcome of one attempt, waiting in the completer for its batch. */
export type Outcome =
  | { kind: 'completed'; id: string; attempt: number; resultJson: string | null }
  | { kind: 'retry'; id: string; attempt: number; claimedAtMs: number | null; errorJson: string; delayMs: number }
  | { kind: 'failed' | 'cancelled'; id: string; attempt: number; claimedAtMs: number | null; errorJson: string }
  | { kind: 'snoozed'; id: string; attempt: number; claimedAtMs: number | null; delayMs: number }
  | {
      kind: 'dead-letter';
      id: string;
      attempt: number;
      claimedAtMs: number | null;
      errorJson: string;
      deadLetterQueue: string;
    };

/**
 * The live columns a completion carries into history (ARCHIVE_COLS less those it sets itself):
 * what its DELETE returns, instead of `j.*` and the columns history has no place for.
 */
const ARCHIVE_SOURCE = `j.id, j.queue, j.name, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
  j.backoff, j.timeout_ms, j.errors, j.created_at, j.started_at, j.locked_by, j.progress, j.trace, j.logs, j.unique_key, j.group_key`;

/**
 * The one row a batch write answers (completeArchive, completeDelete): `n` rows written of the
 * `cardinality($1)` asked, and their ids only when some were not written (a lease was lost),
 * else NULL. `cte` names the CTE whose RETURNING id lists the rows written.
 */
function writtenRowSql(cte: string, published: string): string {
  return `SELECT count(*)::int AS n, CASE WHEN count(*) < pg_catalog.cardinality($1::bigint[]) THEN coalesce(pg_catalog.array_agg(id), '{}') END AS ids,
        ${published} AS published
      FROM ${cte}`;
}

/** The completions: into history, or deleted when completed jobs are not kept; in a batch or in the caller's transaction. */
export function completionStatements(sql: SchemaSql) {
  const { jobs, history, ack } = sql;
  // The completions' attempt guard. A guard looking each row's attempt up by its position in an
  // attempt[] (array_position scans the id array) cost a batch of n n^2/2 comparisons: 2-3 us
  // per job at 480 measured alone (PostgreSQL 15). Nearly every batch is of one attempt (first
  // attempts): it comes as that one number; a batch of mixed attempts as a JSON object keyed by
  // id, a binary search per row. Without the scan the server's CPU per drained job fell by 10 %
  // (docs/benchmarks.md). `byId` names the object's parameter.
  const attemptOk = (byId: string) => `j.attempt = coalesce($2::int, (${byId}::jsonb ->> j.id::text)::int)`;
  return {
    /**
     * Completes a batch: the rows leave the live table and enter history in one statement.
     * (id, attempt, locked_by) must still match, so a worker that lost its lease cannot
     * complete the attempt another worker now owns. (locked_by is set only on active rows; not
     * naming `state` keeps the partial index of active jobs out of the generic plan, so the primary key
     * drives it however many jobs are active.) One row back whatever the batch (writtenRowSql): a
     * row per job cost the worker about 1 µs each to decode for nothing, as nearly every batch is
     * written whole. Results come as one JSON object keyed by id, a binary search per row where
     * a result[] looked up by position scanned the id array (2.1 against 0.2 us per job at 480,
     * PostgreSQL 15); a job without a result has no key, so its `out` is NULL.
     * $1 id[] (no duplicates) $2 every job's attempt (NULL when they differ) $3 results
     * (`{"id": result, ...}`, or NULL: every result NULL) $4 worker $5 attempts when they
     * differ (`{"id": attempt, ...}`, else NULL)
     */
    completeArchive: `
      WITH done AS (
        DELETE FROM ${jobs} j
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4
          AND ${attemptOk('$5')} ${ack}
        RETURNING ${ARCHIVE_SOURCE}, $3::jsonb -> j.id::text AS out
      ), archived AS (
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'completed', priority, run_at, attempt, max_attempts,
               backoff, timeout_ms, errors, out, created_at, started_at, now(), locked_by, progress, trace, logs, unique_key, group_key
        FROM done
        RETURNING id, queue, attempt
      )${publishCte(sql, 'completed', 'archived')}
      ${writtenRowSql('archived', publishRef(sql))}`,

    /**
     * job.completeWith({ manager }): completes one attempt inside the caller's transaction, so
     * the handler's writes and the completion commit together. No asyncCommit here: that would
     * change the caller's whole transaction. 0 rows: the lease was lost. Top-level SELECT, which
     * TypeORM's query() answers with rows. $1 id $2 worker $3 attempt $4 result $5 keep history
     */
    completeInTransaction: `
      WITH done AS (
        DELETE FROM ${jobs} j WHERE j.id = $1 AND j.locked_by = $2 AND j.attempt = $3 RETURNING j.*
      ), archived AS (
        INSERT INTO ${history} (${ARCHIVE_COLS})
        SELECT id, queue, name, payload, 'completed', priority, run_at, attempt, max_attempts,
               backoff, timeout_ms, errors, $4::jsonb, created_at, started_at, now(), locked_by, progress, trace, logs, unique_key, group_key
        FROM done WHERE $5::boolean
      )${publishCte(sql, 'completed', 'done')}
      SELECT count(*)::int AS n, ${publishRef(sql)} AS published FROM done`,

    /**
     * Completes a batch without keeping history (retention.completedMs = 0). $1 id[] $2 attempt
     * (as completeArchive) $3 worker $4 attempts when they differ (as completeArchive's $5)
     */
    completeDelete: `
      WITH done AS (
        DELETE FROM ${jobs} j
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $3 AND ${attemptOk('$4')} ${ack}
        RETURNING j.id, j.queue, j.attempt
      )${publishCte(sql, 'completed', 'done')}
      ${writtenRowSql('done', publishRef(sql))}`,
  };
}

/** The other ends of an attempt: retry later, fail or cancel into history, snooze, dead-letter. */
export function failureStatements(sql: SchemaSql) {
  const { jobs, history, ack } = sql;
  // Batch statements look up each row's values by its position in the id array. A join with
  // unnest(...) planned, as a prepared statement, a nested loop re-reading the whole unnest for
  // every row: 61 ms for 450 jobs, quadratic (measured); array_position is a tight loop in C.
  const at = 'pg_catalog.array_position($1::bigint[], j.id)';
  // Each appended error carries its attempt's start and end on the database's clock (startedAt,
  // endedAt): the row keeps only the latest attempt's started_at, so the dashboard's timeline
  // knew an earlier attempt only from the worker's own `at` (lib/dashboard/job-timeline.ts).
  // Two more keys in a failure's error object; a completion writes none.
  // The claim that started the attempt, as well as its worker and number: a claim that a crash
  // forgot (asyncCommit) takes its increment of the attempt with it, so the same worker's next
  // claim of the job has the same number, and the forgotten attempt's failure, written once the
  // database is back, would land on it (docs/reliability.md, case 4). The worker sends the claim's
  // started_at as the claim returned it (epoch ms, the claim's own epochMs); NULL skips the check
  // (an outcome the worker did not claim itself). Within 1 ms, not equal:
  // the value travels as a float8's text, which a server set to extra_float_digits = 0 rounds to
  // 15 digits (10 us here), and two claims of a job a crash apart are seconds apart.
  const claimedBy = (p: number) =>
    `(($${p}::float8[])[${at}] IS NULL OR pg_catalog.abs(${epochMs('j.started_at')} - ($${p}::float8[])[${at}]) < 1::float8)`;
  return {
    /**
     * Schedules the next attempt of failed jobs, appending each attempt's error.
     * $1 id[] $2 attempt[] $3 error[] (JSON objects) $4 delay_ms[] $5 worker $6 claimed-at ms[]
     */
    retry: `
      WITH retried AS (
      UPDATE ${jobs} j
      SET state = 'waiting', run_at = now() + ($4::bigint[])[${at}]::float8 * interval '1 millisecond',
          locked_by = NULL, locked_until = NULL,
          errors = j.errors || pg_catalog.jsonb_build_array((($3::text[])[${at}])::jsonb ||
            pg_catalog.jsonb_build_object('worker', $5::text, 'startedAt', j.started_at, 'endedAt', now()))
      WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $5 AND j.attempt = ($2::int[])[${at}] AND ${claimedBy(6)} ${ack}
      RETURNING j.id, j.queue, j.attempt
      )${publishCte(sql, 'retrying', 'retried')}
      SELECT id, ${publishRef(sql)} AS published FROM retried`,

    /**
     * Moves jobs to history as failed (no attempts left) or cancelled, with the attempt's error.
     * $1 id[] $2 attempt[] $3 error[] $4 worker $5 'failed' | 'cancelled' $6 claimed-at ms[]
     */
    fail: `
      WITH failed AS (
        DELETE FROM ${jobs} j
        WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4 AND j.attempt = ($2::int[])[${at}] AND ${claimedBy(6)} ${ack}
        RETURNING j.*, ($3::text[])[${at}] AS err
      ), archived AS (
      INSERT INTO ${history} (${ARCHIVE_COLS})
      SELECT id, queue, name, payload, $5::text, priority, run_at, attempt, max_attempts, backoff,
             timeout_ms, errors || pg_catalog.jsonb_build_array(err::jsonb ||
               pg_catalog.jsonb_build_object('worker', $4::text, 'startedAt', started_at, 'endedAt', now())), NULL, created_at,
             started_at, now(), locked_by, progress, trace, logs, unique_key, group_key
      FROM failed
      RETURNING id, queue, attempt
      )${publishCte(sql, 'failed', "archived WHERE $5 = 'failed'", 'pub_failed')}${publishCte(sql, 'cancelled', "archived WHERE $5 = 'cancelled'", 'pub_cancelled')}
      SELECT id, ${publishRef(sql, 'pub_failed')} + ${publishRef(sql, 'pub_cancelled')} AS published FROM archived`,

    /**
     * A handler snoozed its job: back to waiting after a delay, the attempt not counted.
     * $1 id[] $2 attempt[] $3 delay_ms[] $4 worker $5 claimed-at ms[]
     */
    snooze: `
      WITH snoozed AS (
      UPDATE ${jobs} j
      SET state = 'waiting', run_at = now() + ($3::bigint[])[${at}]::float8 * interval '1 millisecond',
          locked_by = NULL, locked_until = NULL, attempt = greatest(j.attempt - 1, 0)
      WHERE j.id = ANY($1::bigint[]) AND j.locked_by = $4 AND j.attempt = ($2::int[])[${at}] AND ${claimedBy(5)} ${ack}
      RETURNING j.id, j.queue, j.attempt
      )${publishCte(sql, 'snoozed', 'snoozed')}
      SELECT id, ${publishRef(sql)} AS published FROM snoozed`,

    /**
     * A failed job's last attempt moves it to the dead-letter queue instead: waiting there, its
     * attempts reset, its errors kept; its unique key is dropped (it may clash there).
     * The event is published under the queue the job leaves (`o`, the row before the update),
     * so that queue's listeners hear it. $1 id[] $2 attempt[] $3 error[] $4 worker
     * $5 dead-letter queue $6 channel $7 claimed-at ms[]
     */
    deadLetter: `
      WITH moved AS (
        UPDATE ${jobs} j
        SET queue = $5, state = 'waiting', attempt = 0, run_at = now(), locked_by = NULL, locked_until = NULL,
            unique_key = NULL, cancel_requested_at = NULL,
            errors = j.errors || pg_catalog.jsonb_build_array((($3::text[])[${at}])::jsonb ||
              pg_catalog.jsonb_build_object('worker', $4::text, 'startedAt', j.started_at, 'endedAt', now()))
        FROM ${jobs} o
        WHERE o.id = j.id AND o.id = ANY($1::bigint[])
          AND j.id = ANY($1::bigint[]) AND j.locked_by = $4 AND j.attempt = ($2::int[])[${at}] AND ${claimedBy(7)} ${ack}
        RETURNING j.id, o.attempt, o.queue
      ), wake AS (SELECT pg_catalog.pg_notify($6, $5 || '|0') WHERE EXISTS (SELECT 1 FROM moved))${publishCte(sql, 'deadLettered', 'moved')}
      SELECT id, (SELECT count(*) FROM wake) AS woken, ${publishRef(sql)} AS published FROM moved`,
  };
}

/** A batch completion's answer: how many rows it wrote, and which, only when not all of them. */
interface WrittenRow {
  n: number;
  ids: string[] | null;
}

/** Marks a statement that wrote every outcome of its group (see `settle`). */
export const ALL: readonly { id: string }[] = Object.freeze([]);

type Of<K extends Outcome['kind']> = Extract<Outcome, { kind: K }>;

/**
 * One writer per outcome statement, on the queue's own pool: each binds its statement's
 * parameters for a batch of one kind and answers the rows written (ALL: every one of them).
 */
export class OutcomeWriters {
  private readonly q: ReturnType<typeof completionStatements> & ReturnType<typeof failureStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = { ...completionStatements(ctx.sql), ...failureStatements(ctx.sql) };
  }

  /** Completes a batch: into history, or deleted when no retention keeps completed jobs (completedMs = 0 everywhere). */
  async complete(done: readonly Of<'completed'>[], workerId: string): Promise<readonly { id: string }[]> {
    const ids = bigintArrayText(done.map((o) => o.id));
    const attempts = attemptParams(done);
    const resultParam = resultsByIdJson(done);
    const { db } = this.ctx;
    const [r] = this.ctx.retentions.keepsCompleted
      ? await db.query<WrittenRow>(
          this.q.completeArchive,
          [ids, attempts.attempt, resultParam, workerId, attempts.byId],
          this.ctx.name(this.q.completeArchive),
        )
      : await db.query<WrittenRow>(
          this.q.completeDelete,
          [ids, attempts.attempt, workerId, attempts.byId],
          this.ctx.name(this.q.completeDelete),
        );
    return r.ids === null ? ALL : r.ids.map((id) => ({ id }));
  }

  retry(list: readonly Of<'retry'>[], workerId: string): Promise<{ id: string }[]> {
    return this.ctx.db.query(this.q.retry, [
      list.map((o) => o.id),
      list.map((o) => o.attempt),
      list.map((o) => o.errorJson),
      list.map((o) => o.delayMs),
      workerId,
      claimedAt(list),
    ]);
  }

  deadLetter(list: readonly Of<'dead-letter'>[], deadLetterQueue: string, workerId: string): Promise<{ id: string }[]> {
    return this.ctx.db.query(this.q.deadLetter, [
      list.map((o) => o.id),
      list.map((o) => o.attempt),
      list.map((o) => o.errorJson),
      workerId,
      deadLetterQueue,
      this.ctx.channel,
      claimedAt(list),
    ]);
  }

  fail(list: readonly Of<'failed' | 'cancelled'>[], state: 'failed' | 'cancelled', workerId: string): Promise<{ id: string }[]> {
    return this.ctx.db.query(this.q.fail, [
      list.map((o) => o.id),
      list.map((o) => o.attempt),
      list.map((o) => o.errorJson),
      workerId,
      state,
      claimedAt(list),
    ]);
  }

  snooze(list: readonly Of<'snoozed'>[], workerId: string): Promise<{ id: string }[]> {
    return this.ctx.db.query(this.q.snooze, [
      list.map((o) => o.id),
      list.map((o) => o.attempt),
      list.map((o) => o.delayMs),
      workerId,
      claimedAt(list),
    ]);
  }

  /** Completes one attempt in the caller's transaction; false when the lease is no longer this worker's. */
  async completeInTransaction(
    db: SqlExecutor,
    id: string,
    workerId: string,
    attempt: number,
    resultJson: string | null,
  ): Promise<boolean> {
    const [r] = await db.query<{ n: number }>(this.q.completeInTransaction, [
      id,
      workerId,
      attempt,
      resultJson,
      this.ctx.retentions.keepsCompleted,
    ]);
    return r.n > 0;
  }
}

/** The claim time of each outcome's attempt (the failure statements' `claimedBy`), null where unknown. */
function claimedAt(list: readonly { readonly claimedAtMs: number | null }[]): (number | null)[] {
  return list.map((o) => o.claimedAtMs);
}
