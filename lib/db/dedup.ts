import type { Job } from '../core/job';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import { quote } from '../core/input-text';
import type { SqlExecutor } from './executor';
import { INSERT_COLUMNS, insertColumns } from './insert';
import { insertedToJob, type NewJobRow } from './new-job';
import { DURABLE, type StoreContext } from './store-context';

/**
 * Deduplication with a window (migration 13, BullMQ's throttle mode): `job_dedup` names, per queue
 * and key, the job that holds the key until `expires_at`, live or finished. The adds of one call
 * that carry `deduplication` and those that do not go in one statement:
 * 1. `claim` takes each key: a new row, or an expired one taken over (ON CONFLICT DO UPDATE ...
 *    WHERE it expired). Whether the holder still exists cannot be asked here: the statement's
 *    snapshot predates a holder committed while this add waited on its key (that read took over
 *    keys held by live jobs, measured: 20 jobs from 20 concurrent adds); insertDeduplicated asks
 *    after the statement, and frees and claims again a key whose job is gone. The key's row is the lock: a concurrent add of the same key, on any node, waits for this
 *    transaction and then finds the key held. Keys are claimed in (queue, key) order, so two
 *    calls claiming the same keys cannot deadlock. The job id is drawn from the jobs' identity
 *    sequence here, so the claim can name the job before the job exists (no second write of the
 *    row in the same statement, which PostgreSQL refuses).
 * 2. `numbered` gives each job to insert its id: the claimed one, or the next from the sequence
 *    for a job without deduplication; an input whose key is held gets none and inserts nothing.
 * 3. `ins` inserts them (OVERRIDING SYSTEM VALUE: the id chosen above), `wake` notifies per queue.
 * Not the hot path: adds without deduplication never come here (Queue.add picks the statement).
 * $1 payload[], INSERT_COLUMNS[] (arrays), dedup key[], ttl ms[], channel
 */
export function buildDedupInsert(sqlJobs: string, s: string, durable: boolean): string {
  const n = INSERT_COLUMNS.length;
  const arrays = [
    '$1::text[]',
    ...INSERT_COLUMNS.map(([, type], i) => `$${i + 2}::${type}[]`),
    `$${n + 2}::text[]`,
    `$${n + 3}::bigint[]`,
  ];
  const names = ['payload', ...INSERT_COLUMNS.map(([col]) => col), 'dedup_key', 'ttl_ms'];
  const seq = `pg_catalog.nextval(pg_catalog.pg_get_serial_sequence(${quoteLiteral(`${s}.jobs`)}, 'id')::regclass)`;
  return `
    WITH input AS (
      SELECT * FROM ROWS FROM (${arrays.map((a) => `pg_catalog.unnest(${a})`).join(', ')}) WITH ORDINALITY AS t(${names.join(', ')}, ord)
    ), claim AS (
      INSERT INTO ${s}.job_dedup AS d (queue, key, job_id, expires_at)
      SELECT queue, dedup_key, ${seq}, now() + ttl_ms::float8 * interval '1 millisecond'
      FROM input WHERE dedup_key IS NOT NULL
      ORDER BY queue, dedup_key
      ON CONFLICT (queue, key) DO UPDATE
        SET job_id = EXCLUDED.job_id, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
        WHERE d.expires_at <= now()
      RETURNING queue, key, job_id
    ), numbered AS MATERIALIZED (
      SELECT i.*, CASE WHEN i.dedup_key IS NULL THEN ${seq} ELSE c.job_id END AS new_id
      FROM input i LEFT JOIN claim c ON c.queue = i.queue AND c.key = i.dedup_key
      ${durable ? `WHERE ${DURABLE}` : ''}
    ), ins AS (
      INSERT INTO ${sqlJobs} (id, queue, name, payload, priority, run_at, max_attempts, backoff, timeout_ms, trace, group_key)
      OVERRIDING SYSTEM VALUE
      SELECT new_id, queue, name, payload::jsonb, priority, coalesce(run_at, now() + delay_ms::float8 * interval '1 millisecond'),
             max_attempts, backoff::jsonb, timeout_ms, trace::jsonb, group_key
      FROM numbered WHERE new_id IS NOT NULL ORDER BY ord
      RETURNING id, queue, run_at
    ), wake AS (
      SELECT pg_catalog.pg_notify($${n + 4}, queue || '|' ||
               greatest(0, pg_catalog.ceil(extract(epoch FROM pg_catalog.min(run_at) - now())::float8 * 1000::float8))::bigint::text)
      FROM ins GROUP BY queue
    )
    SELECT (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_array(ord, new_id::text) ORDER BY ord), '[]')
            FROM numbered WHERE new_id IS NOT NULL) AS rows,
           now() AS now, (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM wake) AS woken`;
}

function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** The adds with `deduplication`, and the two calls on the keys (BullMQ's getDeduplicationJobId, removeDeduplicationKey). */
export class DedupInserts {
  private readonly durableSql: string;
  private readonly txSql: string;
  private readonly q: { holder: string; holderAny: string; freeIfHeldBy: string; removeKey: string; removeQueueKeys: string };

  constructor(private readonly ctx: StoreContext) {
    const { s, jobs } = ctx.sql;
    this.durableSql = buildDedupInsert(jobs, s, true);
    this.txSql = buildDedupInsert(jobs, s, false);
    this.q = {
      /** The job holding a key now (its window not over). $1 queue $2 key */
      holder: `SELECT job_id::text AS id FROM ${s}.job_dedup WHERE queue = $1 AND key = $2 AND expires_at > now()`,
      /** The job a key names, its window over or not (an add just found it held). $1 queue $2 key */
      holderAny: `SELECT job_id::text AS id FROM ${s}.job_dedup WHERE queue = $1 AND key = $2`,
      /** Frees a key whose job is gone, unless another add took it meanwhile. $1 queue $2 key $3 job id */
      freeIfHeldBy: `DELETE FROM ${s}.job_dedup WHERE queue = $1 AND key = $2 AND job_id = $3::bigint`,
      /** Frees a key before its window ends. $1 queue $2 key */
      removeKey: `DELETE FROM ${s}.job_dedup WHERE queue = $1 AND key = $2`,
      /** obliterate(): a batch of the queue's keys, on the primary key (queue, key). $1 queue $2 batch */
      removeQueueKeys: `
        WITH d AS (DELETE FROM ${s}.job_dedup WHERE (queue, key) IN (SELECT queue, key FROM ${s}.job_dedup WHERE queue = $1 LIMIT $2) RETURNING 1)
        SELECT count(*)::int AS n FROM d`,
    };
  }

  /**
   * Inserts the jobs of one call, some with `deduplication`, in one statement (buildDedupInsert).
   * Returns the Job of each input, in input order: the new one, or the one that holds its key
   * (read back by id, live or finished), and `inserted`: the inputs that made a new row.
   * `getJob` reads a holder in the same transaction as the add.
   */
  async insertDeduplicated<T>(
    rows: readonly NewJobRow[],
    getJob: (id: string, db: SqlExecutor | undefined) => Promise<Job<T> | null>,
    db: SqlExecutor = this.ctx.db,
    again = false,
  ): Promise<{ jobs: Job<T>[]; inserted: NewJobRow[] }> {
    const seen = new Set<string>();
    for (const r of rows) {
      if (r.dedupKey === null) continue;
      const k = `${r.queue}\u0000${r.dedupKey}`;
      if (seen.has(k)) {
        throw new PgQueueConfigError(
          `deduplication key ${quote(r.dedupKey)} appears twice in one addBulk call (queue ${quote(r.queue)}); pass each key once.`,
        );
      }
      seen.add(k);
    }
    const sql = db === this.ctx.db ? this.durableSql : this.txSql;
    const [out] = await db.query<{ rows: [number, string][]; now: Date }>(sql, [
      rows.map((r) => r.payloadJson),
      ...insertColumns(rows),
      rows.map((r) => r.dedupKey),
      rows.map((r) => (r.dedupKey === null ? null : r.dedupTtlMs)),
      this.ctx.channel,
    ]);
    const now = new Date(out.now);
    const idOf = new Map<number, string>(out.rows.map(([ord, id]) => [ord - 1, id]));
    const inserted: NewJobRow[] = [];
    const jobs: Job<T>[] = new Array<Job<T>>(rows.length);
    const orphans: number[] = [];
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      const id = idOf.get(i);
      if (id !== undefined) {
        inserted.push(r);
        jobs[i] = insertedToJob<T>(r, id, now);
        continue;
      }
      // The key is held: the job that holds it, as it is now (the first add's, perhaps finished),
      // read by a new statement, so a holder committed while this add waited on its key is seen.
      const found = await db.query<{ id: string }>(this.q.holderAny, [r.queue, r.dedupKey]);
      const job = found.length ? await getJob(found[0].id, db === this.ctx.db ? undefined : db) : null;
      if (job) {
        jobs[i] = job;
        continue;
      }
      // Its job is gone (removed, or pruned past retention before the window ended): the key is
      // free. Freed only if it still names that job, then claimed again, once.
      if (found.length) await db.query(this.q.freeIfHeldBy, [r.queue, r.dedupKey, found[0].id]);
      orphans.push(i);
    }
    if (orphans.length) {
      if (again) {
        throw new PgQueueError(
          `The job holding deduplication key ${quote(rows[orphans[0]].dedupKey)} in queue ${quote(rows[orphans[0]].queue)} ` +
            'was removed twice while this add ran, so this job was not added. Add it again.',
        );
      }
      const retried = await this.insertDeduplicated<T>(
        orphans.map((i) => rows[i]),
        getJob,
        db,
        true,
      );
      orphans.forEach((i, n) => (jobs[i] = retried.jobs[n]));
      inserted.push(...retried.inserted);
    }
    return { jobs, inserted };
  }

  /** The id of the job holding `key` in `queue` now (its window not over), or null. */
  async holder(queue: string, key: string, db: SqlExecutor = this.ctx.db): Promise<string | null> {
    const rows = await db.query<{ id: string }>(this.q.holder, [queue, key]);
    return rows.length ? rows[0].id : null;
  }

  /** Frees `key` in `queue` before its window ends; true when it was held (expired or not). */
  async removeKey(queue: string, key: string, db: SqlExecutor = this.ctx.db): Promise<boolean> {
    const rows = await db.query<{ n: number }>(`WITH d AS (${this.q.removeKey} RETURNING 1) SELECT count(*)::int AS n FROM d`, [
      queue,
      key,
    ]);
    return rows[0].n > 0;
  }

  /** Every key of `queue` (obliterate), a batch per statement, each its own short transaction. */
  async removeQueueKeys(queue: string, batch = 1000): Promise<number> {
    let total = 0;
    for (;;) {
      const [r] = await this.ctx.db.query<{ n: number }>(this.q.removeQueueKeys, [queue, batch]);
      total += r.n;
      if (r.n < batch) return total;
    }
  }
}
