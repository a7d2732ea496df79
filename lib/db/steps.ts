import type { PgPoolClient } from '../core/pg-types';
import type { RecordedJobSteps, RecordedStep } from '../core/steps';
import { clientExecutor, type SqlExecutor } from './executor';
import { publishCte, publishRef } from './events';
import type { SchemaSql, StoreContext } from './store-context';

/** One recorded step of a job (migrations/0018_steps.sql): core's RecordedStep. */
export type StepRow = RecordedStep;

/** What the worker reads once per attempt, on the first step: the recorded steps and the database's clock. */
export type RecordedSteps = RecordedJobSteps;

/** A step to record: its JSON result (null: none), when it started (worker clock, ms). */
export interface StepRecord {
  readonly jobId: string;
  readonly workerId: string;
  readonly attempt: number;
  readonly name: string;
  readonly seq: number;
  readonly resultJson: string | null;
  readonly startedAtMs: number;
}

const ms = (col: string) => `extract(epoch FROM ${col})::float8 * 1000::float8`;

/** The JSON object of one step row, as the reads return it. */
const STEP_JSON = `pg_catalog.jsonb_build_object('name', s.name, 'seq', s.seq, 'kind', s.kind, 'status', s.status,
  'result', s.result, 'absent', s.result IS NULL, 'attempt', s.attempt, 'startedAtMs', ${ms('s.started_at')},
  'finishedAtMs', ${ms('s.finished_at')}, 'wakeAtMs', ${ms('s.wake_at')})`;

/**
 * The statements of durable steps. Every write by a worker is guarded like an outcome: the job's
 * row must still be this attempt's (id, locked_by, attempt), read FOR SHARE, so a rescue (an
 * UPDATE of that row) waits until the step's transaction ends: a worker that lost its lease
 * records nothing, and one that still holds it commits its record before the job can change hands.
 */
export function stepStatements(sql: SchemaSql) {
  const { s, jobs, ack } = sql;
  const steps = `${s}.job_steps`;
  // On the pool only (park, timeOut): these commit without the WAL flush, as a snooze does (`ack`).
  const owner = `owner AS (SELECT j.id, j.queue FROM ${jobs} j WHERE j.id = $1 AND j.locked_by = $2 AND j.attempt = $3 ${ack} FOR SHARE)`;
  return {
    /** The steps of one job, oldest first, and the database's clock. $1 id */
    load: `
      SELECT ${ms('now()')} AS now_ms,
             coalesce((SELECT pg_catalog.jsonb_agg(${STEP_JSON} ORDER BY s.seq NULLS LAST, s.name)
                       FROM ${steps} s WHERE s.job_id = $1), '[]'::jsonb) AS steps`,

    /**
     * Records a finished step, guarded by the lease; one that is there already (another run
     * recorded it first) is left as it is and answers nothing. On the queue's pool it commits
     * without waiting for the WAL flush, as outcomes do (`ack`): a record lost in a server crash
     * only runs its step again, which a step outside a transaction allows (at least once); 5 ms
     * per step with the flush on this machine's disk, against 0.3 ms (bench/steps.mjs). In a
     * transactional step's own transaction it never does: that commit carries the app's writes.
     * $1 id $2 worker $3 attempt $4 name $5 seq $6 result $7 started (ms)
     */
    record: recordSql(steps, jobs, ack),
    recordInTransaction: recordSql(steps, jobs, ''),

    /**
     * Parks the job: records a sleep (or a wait) and hands the job back to the queue until
     * wake_at, its attempt not counted (as a snooze), in one statement. A wait whose signal is
     * there already parks nothing (its row exists: nothing inserted, nothing parked); a sleep or
     * wait recorded by an earlier run is moved on (its wake_at kept, only its seq and attempt
     * brought up to date). Publishes `parked` (a queue event) when the events are on.
     * $1 id $2 worker $3 attempt $4 name $5 seq $6 kind $7 status
     * $8 wake_at (ms; NULL: a wait without timeout) $9 park until (ms)
     */
    park: `
      WITH ${owner},
      step AS (
        INSERT INTO ${steps} (job_id, name, seq, kind, status, attempt, started_at, finished_at, wake_at)
        SELECT o.id, $4, $5, $6, $7, $3, now(), now(), pg_catalog.to_timestamp($8::float8 / 1000::float8)
        FROM owner o
        ON CONFLICT (job_id, name) DO UPDATE SET seq = EXCLUDED.seq, attempt = EXCLUDED.attempt
          WHERE ${steps}.status = EXCLUDED.status
        RETURNING job_id
      ), parked AS (
        UPDATE ${jobs} j
        SET state = 'waiting', run_at = pg_catalog.to_timestamp($9::float8 / 1000::float8),
            locked_by = NULL, locked_until = NULL, attempt = greatest(j.attempt - 1, 0)
        FROM owner o
        WHERE j.id = o.id AND EXISTS (SELECT 1 FROM step)
        RETURNING j.id, j.queue, j.attempt
      )${publishCte(sql, 'parked', 'parked')}
      SELECT (SELECT count(*) FROM owner)::int AS owned, (SELECT count(*) FROM parked)::int AS parked,
             ${publishRef(sql)} AS published`,

    /**
     * A wait's timeout came before its signal: marked, so a later signal is refused. $1 id
     * $2 worker $3 attempt $4 name
     */
    timeOut: `
      WITH ${owner}
      UPDATE ${steps} st SET status = 'timed-out', finished_at = now()
      FROM owner o
      WHERE st.job_id = o.id AND st.name = $4 AND st.status = 'waiting'
      RETURNING st.status`,

    /**
     * queue.signal(): the payload of a wait, kept for a wait not reached yet, or delivered to one
     * the job reached (`was_waiting`: a row the job wrote has its attempt; one the signal inserts
     * has none). The job is then woken by `wake`, a statement of its own: this one's snapshot may
     * predate the park its ON CONFLICT waited for, and an UPDATE would not see the job parked.
     * Refused (no row) for a job not live, a wait already signalled or timed out.
     * $1 id $2 name $3 payload $4 queue
     */
    signal: `
      WITH live AS (SELECT j.id FROM ${jobs} j WHERE j.id = $1 AND j.queue = $4)
      INSERT INTO ${steps} (job_id, name, kind, status, result, finished_at)
      SELECT l.id, $2, 'wait', 'done', $3::jsonb, now() FROM live l
      ON CONFLICT (job_id, name) DO UPDATE SET status = 'done', result = EXCLUDED.result, finished_at = now()
        WHERE ${steps}.kind = 'wait' AND ${steps}.status = 'waiting'
      RETURNING attempt IS NOT NULL AS was_waiting`,

    /**
     * A signal sent before its wait is reached gets the wait's place in the run (seq) and the
     * attempt that read it, for the reads' order. $1 id $2 name $3 seq $4 attempt
     */
    placeSignal: `
      UPDATE ${steps} SET seq = $3, attempt = $4 WHERE job_id = $1 AND name = $2 AND seq IS NULL RETURNING seq`,

    /** Wakes a parked job whose wait was signalled, as an enqueue does. $1 id $2 queue $3 channel */
    wake: `
      WITH up AS (
        UPDATE ${jobs} SET run_at = now() WHERE id = $1 AND queue = $2 AND state = 'waiting' AND run_at > now() RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($3, $2 || '|0') WHERE EXISTS (SELECT 1 FROM up))
      SELECT (SELECT count(*) FROM up)::int AS n, (SELECT count(*) FROM wake)::int AS woken`,

    /** Where a signalled wait makes its job due now (the testing toolkit's advance). $1 id */
    dueNow: `
      UPDATE ${jobs} SET run_at = now() WHERE id = $1 AND state = 'waiting' AND run_at > now() RETURNING queue`,

    /**
     * Maintenance: the steps of jobs gone from both tables (finished jobs whose history was
     * pruned, removed jobs), recorded longer ago than the shortest retention, $2 rows at a time,
     * oldest first on job_steps_finished_idx. Rows of jobs still live (or in history) that are
     * that old are passed over on every pass: the cost of a job that lives longer than retention.
     * $1 ms $2 batch
     */
    sweepOrphans: `
      DELETE FROM ${steps} WHERE (job_id, name) IN (
        SELECT x.job_id, x.name FROM ${steps} x
        WHERE x.finished_at < now() - $1::bigint::float8 * interval '1 millisecond'
          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.id = x.job_id)
          AND NOT EXISTS (SELECT 1 FROM ${s}.job_history h WHERE h.id = x.job_id)
        ORDER BY x.finished_at
        LIMIT $2)`,
  };
}

/** The guarded INSERT of a finished step (see `record`); `ack`: its commit clause, or ''. */
function recordSql(steps: string, jobs: string, ack: string): string {
  return `
      WITH owner AS (SELECT j.id FROM ${jobs} j WHERE j.id = $1 AND j.locked_by = $2 AND j.attempt = $3 ${ack} FOR SHARE)
      INSERT INTO ${steps} (job_id, name, seq, kind, status, result, attempt, started_at, finished_at)
      SELECT o.id, $4, $5, 'step', 'done', $6::jsonb, $3, pg_catalog.to_timestamp($7::float8 / 1000::float8), now()
      FROM owner o
      ON CONFLICT (job_id, name) DO NOTHING
      RETURNING seq`;
}

/** Runs `load` (stepStatements) for one job: its steps, oldest first, and the database's clock. */
export async function loadSteps(db: SqlExecutor, loadSql: string, jobId: string): Promise<RecordedSteps> {
  const [r] = await db.query<LoadedRow>(loadSql, [jobId]);
  return {
    nowMs: r.now_ms,
    steps: r.steps.map(({ absent, result, ...rest }) => ({ ...rest, result: absent ? undefined : result })),
  };
}

/** The raw answer of `load`. */
interface LoadedRow {
  now_ms: number;
  steps: (Omit<StepRow, 'result'> & { result: unknown; absent: boolean })[];
}

/** Durable steps' reads and writes (migrations/0018_steps.sql). */
export class JobSteps {
  private readonly q: ReturnType<typeof stepStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = stepStatements(ctx.sql);
  }

  /** The recorded steps of a job, and the database's clock. */
  load(jobId: string): Promise<RecordedSteps> {
    return loadSteps(this.ctx.db, this.q.load, jobId);
  }

  /**
   * Records a finished step, on `db` (a transactional step's own transaction) or the pool.
   * 'not-recorded': another run recorded it first (read it back), or the lease is gone.
   */
  async record(rec: StepRecord, db?: SqlExecutor): Promise<'recorded' | 'not-recorded'> {
    const rows = await (db ?? this.ctx.db).query(db ? this.q.recordInTransaction : this.q.record, [
      rec.jobId,
      rec.workerId,
      rec.attempt,
      rec.name,
      rec.seq,
      rec.resultJson,
      rec.startedAtMs,
    ]);
    return rows.length > 0 ? 'recorded' : 'not-recorded';
  }

  /** Parks the job until `parkUntilMs` (database clock); 'lost' when the lease is gone, 'not-parked' when a signal is there. */
  async park(
    rec: Omit<StepRecord, 'resultJson' | 'startedAtMs'>,
    kind: 'sleep' | 'wait',
    wakeAtMs: number | null,
    parkUntilMs: number,
  ): Promise<'parked' | 'not-parked' | 'lost'> {
    const [r] = await this.ctx.db.query<{ owned: number; parked: number }>(this.q.park, [
      rec.jobId,
      rec.workerId,
      rec.attempt,
      rec.name,
      rec.seq,
      kind,
      kind === 'sleep' ? 'sleeping' : 'waiting',
      wakeAtMs,
      parkUntilMs,
    ]);
    if (r.owned === 0) return 'lost';
    return r.parked > 0 ? 'parked' : 'not-parked';
  }

  /** Marks a wait timed out; false when it is no longer waiting (a signal came) or the lease is gone. */
  async timeOut(jobId: string, workerId: string, attempt: number, name: string): Promise<boolean> {
    return (await this.ctx.db.query(this.q.timeOut, [jobId, workerId, attempt, name])).length > 0;
  }

  /**
   * queue.signal(): records the payload for the job's wait `name`, then wakes the job if it was
   * parked on it, on `db` (the caller's transaction) or in a transaction of the pool's. True when
   * the signal was recorded.
   */
  async signal(jobId: string, queue: string, name: string, payloadJson: string, db?: SqlExecutor): Promise<boolean> {
    const run = async (exec: SqlExecutor) => {
      const [r] = await exec.query<{ was_waiting: boolean }>(this.q.signal, [jobId, name, payloadJson, queue]);
      if (r?.was_waiting) await exec.query(this.q.wake, [jobId, queue, this.ctx.channel]);
      return r !== undefined;
    };
    if (db) return run(db);
    return this.ctx.transaction((client) => run(clientExecutor(client)));
  }

  /** Runs `fn` in a transaction on one connection of the queue's pool: a transactional step and its record. */
  transaction<T>(fn: (client: PgPoolClient, exec: SqlExecutor) => Promise<T>): Promise<T> {
    return this.ctx.transaction((client) => fn(client, clientExecutor(client)));
  }

  /** Gives a signal that came before its wait the wait's position (placeSignal). */
  async placeSignal(jobId: string, name: string, seq: number, attempt: number): Promise<void> {
    await this.ctx.db.query(this.q.placeSignal, [jobId, name, seq, attempt]);
  }

  /** Makes a parked job due now (a sleep cut short by the testing toolkit). True when it was parked. */
  async dueNow(jobId: string): Promise<boolean> {
    return (await this.ctx.db.query(this.q.dueNow, [jobId])).length > 0;
  }
}
