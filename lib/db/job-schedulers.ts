import type { JobScheduler, JobSchedulerJobOptions } from '../core/job-scheduler';
import { clientExecutor, type SqlExecutor } from './executor';
import { DURABLE, type StoreContext } from './store-context';

/** A scheduler to store, validated and with its first tick worked out (lib/producer/queue-schedulers.ts). */
export interface SchedulerRow {
  queue: string;
  id: string;
  pattern: string | null;
  everyMs: number | null;
  tz: string;
  startAt: Date | null;
  endAt: Date | null;
  limit: number | null;
  jobName: string;
  payloadJson: string;
  /** The job options as given (what getJobScheduler shows). */
  opts: JobSchedulerJobOptions;
  /** The options every tick's job is inserted with, resolved with the queue's defaults. */
  resolved: { priority: number; maxAttempts: number; backoff: unknown; timeoutMs: number | null; group: string | null };
  /** The first tick, or null for "now" by the database's clock. */
  firstRunAt: Date | null;
  source: 'code' | 'runtime';
}

/** A due scheduler, as the tick's claim returns it. */
export interface DueScheduler {
  queue: string;
  id: string;
  pattern: string | null;
  every_ms: string | null;
  tz: string;
  end_at: Date | null;
  limit: number | null;
  count: number;
  next_run_at: Date;
  now: Date;
}

/** One scheduler's outcome of a pass: the ticks enqueued, and its next tick (null: it ended, removed). */
export interface SchedulerAdvance {
  queue: string;
  id: string;
  runs: Date[];
  next: Date | null;
}

interface StoredScheduler {
  queue: string;
  id: string;
  job_name: string;
  pattern: string | null;
  every_ms: string | null;
  tz: string;
  start_at: Date | null;
  end_at: Date | null;
  limit: number | null;
  count: number;
  payload: unknown;
  job_opts: { given?: JobSchedulerJobOptions };
  next_run_at: Date | null;
  paused: boolean;
  source: 'code' | 'runtime';
  created_at: Date;
  updated_at: Date;
}

const COLS = `queue, id, job_name, pattern, every_ms, tz, start_at, end_at, "limit", count, payload, job_opts,
  next_run_at, paused, source, created_at, updated_at`;

/** Job schedulers (migration 0014): the upserts, reads and the tick's claim and write. */
export function schedulerStatements({ s, jobs }: { s: string; jobs: string }) {
  const t = `${s}.job_schedulers`;
  return {
    /**
     * Inserts or replaces a scheduler. Its next tick is kept when the timing (pattern, every, tz,
     * start) is unchanged, so an app that upserts its schedulers at every boot neither reruns
     * nor skips a tick; a changed timing starts from the new first tick. A runtime upsert does
     * not replace a code-declared scheduler ($16 'runtime': no row back). Top-level INSERT, so a
     * TypeORM manager returns its row.
     */
    upsert: `
      INSERT INTO ${t} AS c (queue, id, pattern, every_ms, tz, start_at, end_at, "limit", job_name, payload, job_opts,
                             next_run_at, source)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb, coalesce($12, now()), $13)
      ON CONFLICT (queue, id) DO UPDATE SET
        next_run_at = CASE WHEN (c.pattern, c.every_ms, c.tz, c.start_at) IS NOT DISTINCT FROM
                                (EXCLUDED.pattern, EXCLUDED.every_ms, EXCLUDED.tz, EXCLUDED.start_at)
                           THEN c.next_run_at ELSE EXCLUDED.next_run_at END,
        pattern = EXCLUDED.pattern, every_ms = EXCLUDED.every_ms, tz = EXCLUDED.tz, start_at = EXCLUDED.start_at,
        end_at = EXCLUDED.end_at, "limit" = EXCLUDED."limit", job_name = EXCLUDED.job_name,
        payload = EXCLUDED.payload, job_opts = EXCLUDED.job_opts, source = EXCLUDED.source, updated_at = now()
      WHERE c.source = 'runtime' OR EXCLUDED.source = 'code'
      RETURNING ${COLS}`,
    /** $1 queue $2 id */
    get: `SELECT ${COLS} FROM ${t} WHERE queue = $1 AND id = $2`,
    /** $1 queue $2 offset $3 limit (null: all); by next tick, then id. */
    listAsc: `SELECT ${COLS} FROM ${t} WHERE queue = $1 ORDER BY next_run_at ASC NULLS LAST, id LIMIT $3 OFFSET $2`,
    listDesc: `SELECT ${COLS} FROM ${t} WHERE queue = $1 ORDER BY next_run_at DESC NULLS LAST, id LIMIT $3 OFFSET $2`,
    count: `SELECT count(*)::int AS n FROM ${t} WHERE queue = $1`,
    remove: `DELETE FROM ${t} WHERE queue = $1 AND id = $2 RETURNING id`,
    /** Pause keeps next_run_at; resume moves a tick that passed meanwhile to the first one from now ($3). */
    pause: `UPDATE ${t} SET paused = true, updated_at = now() WHERE queue = $1 AND id = $2 RETURNING id`,
    resume: `UPDATE ${t} SET paused = false, updated_at = now(), next_run_at = CASE WHEN next_run_at < now() THEN coalesce($3::timestamptz, now()) ELSE next_run_at END
             WHERE queue = $1 AND id = $2 RETURNING id`,
    /**
     * The tick's claim: every due scheduler of every queue of the schema, in one statement, by
     * job_schedulers_due_idx (EXPLAIN: an index scan on next_run_at whatever the number of
     * schedulers). SKIP LOCKED: a row another node's pass holds is that node's; once it
     * commits, its next_run_at is in the future and the row no longer matches (READ COMMITTED
     * re-checks a row that changed before the lock).
     * $1 now (null: the database's) $2 limit
     */
    claimDue: `
      SELECT queue, id, pattern, every_ms, tz, end_at, "limit", count, next_run_at, coalesce($1::timestamptz, now()) AS now
      FROM ${t}
      WHERE NOT paused AND next_run_at IS NOT NULL AND next_run_at <= coalesce($1::timestamptz, now())
      ORDER BY next_run_at
      LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    /**
     * One pass's writes, in one statement: every tick's job (run_at = the tick; its group, if the
     * template has one, from job_opts: a scheduler stored before groups has none), each scheduler's
     * next tick and count, the ended ones removed, and one wake-up per queue.
     * Jobs: $1 queue[] $2 id[] $3 run_at[]. Schedulers: $4 queue[] $5 id[] $6 next[] $7 made[]. $8 channel.
     */
    advance: `
      WITH ins AS (
        INSERT INTO ${jobs} (queue, name, payload, run_at, priority, max_attempts, backoff, timeout_ms, group_key)
        SELECT c.queue, c.job_name, c.payload, t.run_at,
               coalesce((c.job_opts->'resolved'::text->>'priority'::text)::int, 0),
               coalesce((c.job_opts->'resolved'::text->>'maxAttempts'::text)::int, 3),
               nullif(c.job_opts->'resolved'::text->'backoff'::text, 'null'::jsonb),
               (c.job_opts->'resolved'::text->>'timeoutMs'::text)::int,
               c.job_opts->'resolved'::text->>'group'::text
        FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::timestamptz[])) AS t(queue, id, run_at)
        JOIN ${t} c ON c.queue = t.queue AND c.id = t.id
        WHERE ${DURABLE}
        RETURNING queue, run_at
      ), m AS (
        SELECT * FROM ROWS FROM (pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::timestamptz[]), pg_catalog.unnest($7::int[])) AS m(queue, id, next, made)
      ), moved AS (
        UPDATE ${t} c SET next_run_at = m.next, count = c.count + m.made, updated_at = now()
        FROM m WHERE c.queue = m.queue AND c.id = m.id AND m.next IS NOT NULL
        RETURNING 1
      ), ended AS (
        DELETE FROM ${t} c USING m WHERE c.queue = m.queue AND c.id = m.id AND m.next IS NULL
        RETURNING 1
      ), wake AS (
        SELECT pg_catalog.pg_notify($8, queue || '|' ||
          greatest(0, pg_catalog.ceil(extract(epoch FROM pg_catalog.min(run_at) - now())::float8 * 1000::float8))::bigint::text)
        FROM ins GROUP BY queue
      )
      SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM ended)::int AS ended,
             (SELECT count(*) FROM moved)::int AS moved, (SELECT count(*) FROM wake)::int AS woken`,
    /** How long until the soonest tick, by the database's clock (null: none). */
    nextDueInMs: `
      SELECT extract(epoch FROM pg_catalog.min(next_run_at) - now())::float8 * 1000::float8 AS ms
      FROM ${t} WHERE NOT paused AND next_run_at IS NOT NULL`,
    /** Run now: one job from the template, due at once; the schedule is left as it is. $1 queue $2 id $3 channel */
    runNow: `
      WITH ins AS (
        INSERT INTO ${jobs} (queue, name, payload, priority, max_attempts, backoff, timeout_ms, group_key)
        SELECT c.queue, c.job_name, c.payload,
               coalesce((c.job_opts->'resolved'::text->>'priority'::text)::int, 0),
               coalesce((c.job_opts->'resolved'::text->>'maxAttempts'::text)::int, 3),
               nullif(c.job_opts->'resolved'::text->'backoff'::text, 'null'::jsonb),
               (c.job_opts->'resolved'::text->>'timeoutMs'::text)::int,
               c.job_opts->'resolved'::text->>'group'::text
        FROM ${t} c WHERE c.queue = $1 AND c.id = $2 AND ${DURABLE}
        RETURNING id, queue
      ), wake AS (SELECT pg_catalog.pg_notify($3, queue || '|0') FROM ins)
      SELECT id::text AS id, (SELECT count(*) FROM wake)::int AS woken FROM ins`,
    /** Boot reconcile: the code-declared schedulers of $1 queue[] not in ($2 queue[], $3 id[]). */
    removeUndeclared: `
      DELETE FROM ${t} c WHERE c.source = 'code' AND c.queue = ANY($1::text[])
        AND (c.queue, c.id) NOT IN (SELECT * FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])))
      RETURNING queue, id`,
    /** Upgrade from migration 6: the last tick a code schedule enqueued, by its key (queue/name). */
    legacyLastTicks: `SELECT key, last_tick FROM ${s}.cron_schedules WHERE key = ANY($1::text[])`,
    /** Which of ($1 queue[], $2 id[]) exist already. */
    existing: `SELECT queue, id FROM ${t} WHERE (queue, id) IN (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])))`,
  };
}

function toScheduler<T>(r: StoredScheduler): JobScheduler<T> {
  return {
    id: r.id,
    queue: r.queue,
    name: r.job_name,
    pattern: r.pattern,
    every: r.every_ms === null ? null : Number(r.every_ms),
    tz: r.tz,
    startDate: r.start_at,
    endDate: r.end_at,
    limit: r.limit,
    iterationCount: r.count,
    next: r.next_run_at,
    paused: r.paused,
    source: r.source,
    template: { payload: r.payload as T, opts: r.job_opts.given ?? {} },
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The job schedulers of one schema: writes and reads on the queue's pool or the caller's transaction. */
export class JobSchedulers {
  readonly q: ReturnType<typeof schedulerStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = schedulerStatements(ctx.sql);
  }

  /** Inserts or replaces one scheduler; null when `row` is a runtime one and a code-declared one holds the id. */
  async upsert<T>(row: SchedulerRow, db: SqlExecutor = this.ctx.db): Promise<JobScheduler<T> | null> {
    const rows = await db.query<StoredScheduler>(this.q.upsert, [
      row.queue,
      row.id,
      row.pattern,
      row.everyMs,
      row.tz,
      row.startAt,
      row.endAt,
      row.limit,
      row.jobName,
      row.payloadJson,
      JSON.stringify({ given: row.opts, resolved: row.resolved }),
      row.firstRunAt,
      row.source,
    ]);
    return rows.length ? toScheduler<T>(rows[0]) : null;
  }

  async get<T>(queue: string, id: string, db: SqlExecutor = this.ctx.db): Promise<JobScheduler<T> | null> {
    const rows = await db.query<StoredScheduler>(this.q.get, [queue, id]);
    return rows.length ? toScheduler<T>(rows[0]) : null;
  }

  async list<T>(queue: string, offset: number, limit: number | null, asc: boolean): Promise<JobScheduler<T>[]> {
    const rows = await this.ctx.db.query<StoredScheduler>(asc ? this.q.listAsc : this.q.listDesc, [queue, offset, limit]);
    return rows.map((r) => toScheduler<T>(r));
  }

  async countOf(queue: string): Promise<number> {
    return (await this.ctx.db.query<{ n: number }>(this.q.count, [queue]))[0].n;
  }

  async remove(queue: string, id: string, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    return (await db.query(this.q.remove, [queue, id])).length > 0;
  }

  /** Pauses (`resumeAt` undefined) or resumes a scheduler; `resumeAt`: its first tick from now. False: no such scheduler. */
  async setPaused(queue: string, id: string, paused: boolean, resumeAt?: Date | null): Promise<boolean> {
    const rows = paused
      ? await this.ctx.db.query(this.q.pause, [queue, id])
      : await this.ctx.db.query(this.q.resume, [queue, id, resumeAt ?? null]);
    return rows.length > 0;
  }

  /** Enqueues one job from the scheduler's template now; its schedule does not move. The job id, or null without such a scheduler. */
  async runNow(queue: string, id: string): Promise<string | null> {
    const rows = await this.ctx.db.query<{ id: string }>(this.q.runNow, [queue, id, this.ctx.channel]);
    return rows.length ? rows[0].id : null;
  }

  /**
   * One tick pass, in one transaction: claims up to `limit` due schedulers (SKIP LOCKED),
   * lets `plan` work out each one's ticks and next tick, then writes them all in one statement.
   * Two statements per pass whatever the number of schedulers; how many were due.
   */
  async tick(limit: number, now: Date | null, plan: (due: DueScheduler[]) => SchedulerAdvance[]): Promise<number> {
    return this.ctx.transaction(async (client) => {
      const db = clientExecutor(client);
      const due = await db.query<DueScheduler>(this.q.claimDue, [now, limit]);
      if (!due.length) return 0;
      const advances = plan(due);
      const jobs: [string[], string[], Date[]] = [[], [], []];
      for (const a of advances) {
        for (const r of a.runs) {
          jobs[0].push(a.queue);
          jobs[1].push(a.id);
          jobs[2].push(r);
        }
      }
      await db.query(this.q.advance, [
        ...jobs,
        advances.map((a) => a.queue),
        advances.map((a) => a.id),
        advances.map((a) => a.next),
        advances.map((a) => a.runs.length),
        this.ctx.channel,
      ]);
      return due.length;
    });
  }

  /** Milliseconds until the soonest tick of any scheduler of the schema (negative: due), or null without one. */
  async nextDueInMs(): Promise<number | null> {
    const [r] = await this.ctx.db.query<{ ms: number | null }>(this.q.nextDueInMs, []);
    return r.ms === null ? null : Number(r.ms);
  }

  /** Removes the code-declared schedulers of `queues` that are not in `keep`; returns those removed. */
  async removeUndeclared(
    queues: readonly string[],
    keep: readonly { queue: string; id: string }[],
  ): Promise<{ queue: string; id: string }[]> {
    return this.ctx.db.query(this.q.removeUndeclared, [queues, keep.map((k) => k.queue), keep.map((k) => k.id)]);
  }

  /** The schedulers of `keys` already stored. */
  async existing(keys: readonly { queue: string; id: string }[]): Promise<Set<string>> {
    const rows = await this.ctx.db.query<{ queue: string; id: string }>(this.q.existing, [
      keys.map((k) => k.queue),
      keys.map((k) => k.id),
    ]);
    return new Set(rows.map((r) => `${r.queue}/${r.id}`));
  }

  /** The last ticks migration 6's cron_schedules holds for `keys` (queue/name). */
  async legacyLastTicks(keys: readonly string[]): Promise<Map<string, Date>> {
    const rows = await this.ctx.db.query<{ key: string; last_tick: Date }>(this.q.legacyLastTicks, [keys]);
    return new Map(rows.map((r) => [r.key, r.last_tick]));
  }
}
