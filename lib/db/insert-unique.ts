import { escapeIdentifier } from 'pg';
import type { Job } from '../core/job';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import { quote } from '../core/input-text';
import type { SqlExecutor } from './executor';
import { INSERT_COLUMNS, INSERT_PARAMS, insertColumns } from './insert';
import { LIVE_COLS, rowToJob, type JobRow } from './job-row';
import { insertedToJob, type NewJobRow } from './new-job';
import { DURABLE, type StoreContext } from './store-context';

/**
 * The insert for calls where some job has a `uniqueKey`: ON CONFLICT against the partial unique
 * index of live jobs. Keeps (DO NOTHING) or, with `replaceWaiting`, replaces a still-waiting job
 * of the same key (DO UPDATE ... WHERE state = 'waiting'; a running one is left alone). Returns
 * the rows it inserted or replaced as [id, unique_key, inserted] triples, `inserted` false for a
 * replaced one (`xmax = 0` only on a row version this statement inserted: an ON CONFLICT update
 * stamps its own transaction id there); jobs without a key come back in input order (identity
 * values follow the ORDER BY). Not the hot path: every column is an array.
 * $1 payload[], INSERT_COLUMNS[], unique_key[], channel (INSERT_PARAMS.unique)
 */
export function buildUniqueInsert(schema: string, replaceWaiting: boolean, durable: boolean): string {
  const { uniqueKey, channel } = INSERT_PARAMS.unique;
  const arrays = ['$1::text[]', ...INSERT_COLUMNS.map(([, type], i) => `$${i + 2}::${type}[]`), `$${uniqueKey}::text[]`];
  const names = ['payload', ...INSERT_COLUMNS.map(([col]) => col), 'unique_key'];
  const conflict = replaceWaiting
    ? `DO UPDATE SET payload = EXCLUDED.payload, priority = EXCLUDED.priority, run_at = EXCLUDED.run_at,
         max_attempts = EXCLUDED.max_attempts, backoff = EXCLUDED.backoff, timeout_ms = EXCLUDED.timeout_ms,
         trace = EXCLUDED.trace, group_key = EXCLUDED.group_key
       WHERE j.state = 'waiting'`
    : 'DO NOTHING';
  return `
    WITH input AS (
      SELECT * FROM ROWS FROM (${arrays.map((a) => `pg_catalog.unnest(${a})`).join(', ')}) WITH ORDINALITY AS t(${names.join(', ')}, ord)
    ), ins AS (
      INSERT INTO ${escapeIdentifier(schema)}.jobs AS j (queue, name, payload, priority, run_at, max_attempts, backoff, timeout_ms, trace, unique_key, group_key)
      SELECT queue, name, payload::jsonb, priority, coalesce(run_at, now() + delay_ms::float8 * interval '1 millisecond'),
             max_attempts, backoff::jsonb, timeout_ms, trace::jsonb, unique_key, group_key
      FROM input ${durable ? `WHERE ${DURABLE}` : ''} ORDER BY ord
      ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL ${conflict}
      RETURNING j.id, j.queue, j.unique_key, j.run_at, j.xmax = 0 AS inserted
    ), wake AS (
      SELECT pg_catalog.pg_notify($${channel}, queue || '|' ||
               greatest(0, pg_catalog.ceil(extract(epoch FROM pg_catalog.min(run_at) - now())::float8 * 1000::float8))::bigint::text)
      FROM ins GROUP BY queue
    )
    SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_array(id::text, unique_key, inserted) ORDER BY id), '[]') AS rows, now() AS now,
           (SELECT count(*) FROM wake) AS woken
    FROM ins`;
}

/** Jobs with unique keys: the insert that keeps (or replaces) a live job of the same key. */
export class UniqueInserts {
  /** Live jobs by queue and unique key (pairs of arrays). $1 queue[] $2 key[] */
  private readonly liveByUniqueKey: string;

  constructor(private readonly ctx: StoreContext) {
    this.liveByUniqueKey = `
      SELECT ${LIVE_COLS} FROM ${ctx.sql.jobs}
      WHERE (queue, unique_key) IN (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])))`;
  }

  /**
   * Inserts jobs with unique keys (and any others of the same call) in one statement; returns
   * the Job of each input, in input order: the new one, or the live one that holds its key, and
   * `inserted`: the inputs that made a new row (not those that found a live job, nor those that
   * replaced a waiting one: no job was added by them).
   */
  async insertUnique<T>(
    rows: readonly NewJobRow[],
    db: SqlExecutor = this.ctx.db,
  ): Promise<{ jobs: Job<T>[]; inserted: NewJobRow[] }> {
    const keyed = rows.filter((r) => r.uniqueKey !== null);
    const seen = new Set<string>();
    for (const r of keyed) {
      const k = `${r.queue}\u0000${r.uniqueKey}`;
      if (seen.has(k))
        throw new PgQueueConfigError(
          `uniqueKey ${quote(r.uniqueKey)} appears twice in one addBulk call (queue ${quote(r.queue)}); pass each key once.`,
        );
      seen.add(k);
    }
    const replace = keyed[0].replaceWaiting;
    if (keyed.some((r) => r.replaceWaiting !== replace)) {
      throw new PgQueueConfigError(
        'replaceWaiting must be the same for every job with a uniqueKey in one addBulk call; split the call.',
      );
    }
    const sql = buildUniqueInsert(this.ctx.schema, replace, db === this.ctx.db);
    const [out] = await db.query<{ rows: [string, string | null, boolean][]; now: Date }>(sql, [
      rows.map((r) => r.payloadJson),
      ...insertColumns(rows),
      rows.map((r) => r.uniqueKey),
      this.ctx.channel,
    ]);
    const now = new Date(out.now);
    const plainIds = out.rows.filter(([, key]) => key === null).map(([id]) => id);
    const insertedByKey = new Map(out.rows.filter(([, key]) => key !== null).map(([id, key]) => [key as string, id]));
    const newKeys = new Set(out.rows.filter(([, key, isNew]) => key !== null && isNew).map(([, key]) => key as string));
    // Jobs that kept an existing live job, or replaced one (whose createdAt, attempt and state
    // are its own): read back as they are now, in the caller's transaction.
    const lookup = keyed.filter((r) => replace || !insertedByKey.has(r.uniqueKey as string));
    const live = new Map<string, Job<T>>();
    if (lookup.length) {
      const found = await db.query<JobRow & { unique_key: string }>(this.liveByUniqueKey, [
        lookup.map((r) => r.queue),
        lookup.map((r) => r.uniqueKey),
      ]);
      for (const f of found) live.set(`${f.queue}\u0000${f.unique_key}`, rowToJob<T>(f));
    }
    let plain = 0;
    const jobs = rows.map((r) => {
      if (r.uniqueKey === null) return insertedToJob<T>(r, plainIds[plain++], now);
      const existing = live.get(`${r.queue}\u0000${r.uniqueKey}`);
      if (existing) return existing;
      const id = insertedByKey.get(r.uniqueKey);
      if (id !== undefined) return insertedToJob<T>(r, id, now);
      throw new PgQueueError(
        `The job holding uniqueKey ${quote(r.uniqueKey)} in queue ${quote(r.queue)} finished while this add ran, so there is neither ` +
          `a new job nor a live one to return. Add it again.`,
      );
    });
    return { jobs, inserted: rows.filter((r) => r.uniqueKey === null || newKeys.has(r.uniqueKey)) };
  }
}
