import { escapeIdentifier } from 'pg';
import type { Job, JobAttemptError, JobProgress, JobState, QueueCounts } from '../core/job';
import type { ResolvedBackoff } from '../core/pg-queue.options';
import type { PgPool, PgPoolClient } from '../core/pg-types';
import { clientExecutor, poolExecutor, type SqlExecutor } from './executor';
import { HistoryLayoutCache, isUndefinedTable } from './history-by-id';
import { FlowStore, type ExistingDependency, type FlowInserted, type FlowNodeRow } from './flow-store';
import { buildInsert, buildQueries, buildUniqueInsert, INSERT_COLUMNS, type InsertColumn, type Queries } from './queries';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import { quote } from '../core/input-text';
import { isRefusal } from './refusal';
import { attemptParams, bigintArrayText, resultsByIdJson } from './batch-params';

/** A job row as the queries return it. */
export interface JobRow {
  id: string;
  queue: string;
  name: string;
  payload: unknown;
  state: JobState;
  priority: number;
  run_at: Date;
  attempt: number;
  max_attempts: number;
  backoff: ResolvedBackoff | null;
  timeout_ms: number | null;
  errors: JobAttemptError[];
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  result: unknown;
  progress: JobProgress | null;
}

/**
 * A row as the claim returns it: times as epoch milliseconds, cheaper to decode than timestamps;
 * no queue (the claim's own); `errors` null while there are none.
 */
export interface ClaimedRow extends Pick<
  JobRow,
  'id' | 'name' | 'payload' | 'priority' | 'attempt' | 'max_attempts' | 'backoff' | 'timeout_ms' | 'progress'
> {
  errors: JobAttemptError[] | null;
  /** The enqueue's W3C trace context (migration 0009), or null. */
  trace: { traceparent?: unknown; tracestate?: unknown } | null;
  /** Its cancel was asked while an earlier attempt ran: finish it as cancelled, do not run it (null: not asked). */
  cancel_requested: boolean | null;
  run_at_ms: number;
  created_at_ms: number;
  started_at_ms: number;
}

/** The jobs table's row versions (statistics) and its size in pages, now and as last recorded. */
export interface JobsTableSize {
  readonly dead: number;
  readonly live: number;
  readonly pages: number;
  /** pg_class.relpages: the size the last VACUUM or ANALYZE recorded (0 before the first). */
  readonly recordedPages: number;
}

/** A job whose lease expired, as the rescuer found it. */
export interface StalledJob {
  readonly id: string;
  readonly queue: string;
  readonly name: string;
  /** The attempt that stalled. */
  readonly attempt: number;
  /** false when that was its last attempt: it is now failed. */
  readonly willRetry: boolean;
}

/** What the insert returns: the new ids in input order, and the transaction's clock. */
export interface Inserted {
  ids: string[];
  now: Date;
}

function sameValue(a: unknown, b: unknown): boolean {
  return a instanceof Date && b instanceof Date ? a.getTime() === b.getTime() : a === b;
}

/** One job to insert, already validated and serialised. */
export interface NewJobRow {
  queue: string;
  name: string;
  payload: unknown;
  payloadJson: string;
  priority: number;
  runAt: Date | null;
  delayMs: number;
  maxAttempts: number;
  /** null: the worker's queue default applies. */
  backoff: ResolvedBackoff | null;
  timeoutMs: number | null;
  uniqueKey: string | null;
  replaceWaiting: boolean;
  /** The enqueue's trace context as JSON ({ traceparent, tracestate }), or null without an active span. */
  traceJson: string | null;
}

/** What a node writes into the registry with each heartbeat. */
export interface NodeRow {
  readonly host: string;
  readonly pid: number;
  readonly startedAt: Date;
  readonly heartbeatMs: number;
  readonly queues: readonly { readonly name: string; readonly concurrency: number }[];
}

/** The outcome of one attempt, waiting in the completer for its batch. */
export type Outcome =
  | { kind: 'completed'; id: string; attempt: number; resultJson: string | null }
  | { kind: 'retry'; id: string; attempt: number; errorJson: string; delayMs: number }
  | { kind: 'failed' | 'cancelled'; id: string; attempt: number; errorJson: string }
  | { kind: 'snoozed'; id: string; attempt: number; delayMs: number }
  | { kind: 'dead-letter'; id: string; attempt: number; errorJson: string; deadLetterQueue: string };

/** What `settle` did: which outcomes it wrote, and each statement that failed with the outcomes it carried. */
export interface SettleResult<O extends Outcome = Outcome> {
  /** True when this outcome's row was written (false: no row matched, or its statement failed). */
  readonly written: (o: O) => boolean;
  readonly failures: { readonly outcomes: O[]; readonly error: Error }[];
}

/** Marks a statement that wrote every outcome of its group (see `settle`). */
const ALL: readonly { id: string }[] = Object.freeze([]);

/** The statement group of an outcome in `settle`: one per kind, dead letters one per target queue. */
function groupKey(o: Outcome): string {
  return o.kind === 'dead-letter' ? `dead-letter|${o.deadLetterQueue}` : o.kind;
}

/** A batch completion's answer: how many rows it wrote, and which, only when not all of them. */
interface WrittenRow {
  n: number;
  ids: string[] | null;
}

/** `errors` of every new job: readonly in Job, so one frozen array serves them all. */
const NO_ERRORS: readonly never[] = Object.freeze([]);

/**
 * The Job an insert created, from what was sent and what the database assigned. `runAt`: the
 * due time when the caller has it already (insertedToJobs shares one Date between the jobs of a
 * call due at the same instant, as they share `createdAt`).
 */
export function insertedToJob<T>(n: NewJobRow, id: string, now: Date, runAt?: Date): Job<T> {
  // The same arithmetic as the insert's: run_at = coalesce(runAt, now() + delayMs).
  // Compared as numbers: `date > date` converts both through Symbol.toPrimitive on every job.
  const nowMs = now.getTime();
  runAt ??= n.runAt ?? new Date(nowMs + n.delayMs);
  const runAtMs = runAt.getTime();
  return {
    id,
    queue: n.queue,
    name: n.name,
    // The object the caller passed (parsing 1,000 payloads back cost more than the insert's
    // other client-side work); getJob returns what was stored.
    payload: n.payload as T,
    state: runAtMs > nowMs ? 'delayed' : 'waiting',
    priority: n.priority,
    attempt: 0,
    attemptsMade: 0,
    maxAttempts: n.maxAttempts,
    runAt,
    createdAt: now,
    startedAt: null,
    finishedAt: null,
    errors: NO_ERRORS,
    result: null,
    timeoutMs: n.timeoutMs,
    progress: null,
  };
}

/** insertedToJob for each row of one insert (`ids` in the same order), in one pass. */
export function insertedToJobs<T>(rows: readonly NewJobRow[], ids: readonly string[], now: Date): Job<T>[] {
  const out: Job<T>[] = new Array<Job<T>>(rows.length);
  let delayMs = -1;
  let due = now;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (r.runAt === null && r.delayMs !== delayMs) {
      delayMs = r.delayMs;
      due = new Date(now.getTime() + delayMs);
    }
    out[i] = insertedToJob<T>(r, ids[i], now, r.runAt ?? due);
  }
  return out;
}

export function rowToJob<T>(r: JobRow): Job<T> {
  return {
    id: String(r.id),
    queue: r.queue,
    name: r.name,
    payload: r.payload as T,
    state: r.state,
    priority: r.priority,
    attempt: r.attempt,
    // The running attempt has not ended: BullMQ's attemptsMade leaves it out too.
    attemptsMade: r.state === 'active' ? Math.max(r.attempt - 1, 0) : r.attempt,
    maxAttempts: r.max_attempts,
    runAt: r.run_at,
    createdAt: r.created_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    errors: r.errors ?? [],
    result: (r.result ?? null) as never,
    timeoutMs: r.timeout_ms,
    progress: r.progress ?? null,
  };
}

/** A 63-bit advisory lock key derived from a string, identical on every node. */
export function lockKey(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const c of Buffer.from(text)) h = ((h ^ BigInt(c)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return (h & 0x7fffffffffffffffn).toString();
}

/** True for a string that can be a job id (a positive bigint); anything else matches no job. */
export function isJobId(id: string): boolean {
  return /^\d{1,19}$/.test(id);
}

/** Every read and write of job rows, on the queue's pool or on a caller's transaction. */
export class JobStore {
  readonly q: Queries;
  private readonly claimSinceSql: string;
  private readonly claimOutsideSql: string;
  private readonly insertSql = new Map<string, string>();
  private readonly names = new Map<string, string>();
  private readonly prepare: boolean;
  readonly channel: string;
  private readonly db: SqlExecutor;

  readonly schema: string;
  private readonly maxSingleInFlight: number;
  /** Single adds on the pool in flight now, and those waiting to go together (insertCoalesced). */
  private singleInFlight = 0;
  private singleWaiting: { row: NewJobRow; resolve: (r: { id: string; now: Date }) => void; reject: (e: Error) => void }[] = [];
  private readonly retention: { readonly completedMs: number; readonly cancelledMs: number; readonly failedMs: number | null };
  private readonly historyPartitionMs: number;

  constructor(
    readonly pool: PgPool,
    opts: {
      schema: string;
      retention: { readonly completedMs: number; readonly cancelledMs: number; readonly failedMs: number | null };
      /** The span of one history partition (lib/db/history-partitions.ts). @default one day */
      historyPartitionMs?: number;
      asyncCommit: boolean;
      preparedStatements: boolean;
      /** The pool's size: how many single adds may be in flight before the next ones are coalesced. */
      poolSize?: number;
    },
  ) {
    this.maxSingleInFlight = Math.max(1, opts.poolSize ?? 10);
    this.prepare = opts.preparedStatements;
    this.schema = opts.schema;
    this.retention = opts.retention;
    this.historyPartitionMs = opts.historyPartitionMs ?? 86_400_000;
    const schema = opts.schema;
    this.q = buildQueries(schema, { asyncCommit: opts.asyncCommit });
    // Built once, so a claim they cannot extend fails at boot.
    this.claimSinceSql = this.q.claimSince;
    this.claimOutsideSql = this.q.claimOutside;
    // One channel per schema; the payload names the queue. Channel names are identifiers of at
    // most 63 bytes: the schema is at most 48, so this always fits.
    this.channel = `${schema}_jobs`;
    this.db = poolExecutor(pool);
    this.layout = new HistoryLayoutCache(this.db, schema);
    this.flows = new FlowStore(schema, this.channel, this.db);
  }

  /** Which statement the reads by id take (history-by-id.ts). */
  private readonly layout: HistoryLayoutCache;

  /** Flows and dependencies (migration 0008). */
  readonly flows: FlowStore;

  /**
   * Inserts a flow (or a job with dependencies): in the caller's transaction when `db` is one,
   * else on the pool, in a transaction of its own when existing jobs must be locked first.
   */
  async insertFlow(
    nodes: readonly FlowNodeRow[],
    existing: readonly ExistingDependency[],
    db: SqlExecutor | undefined,
  ): Promise<FlowInserted> {
    if (db && db !== this.db) return this.flows.insert(nodes, existing, db, false);
    if (existing.length === 0) return this.flows.insert(nodes, existing, this.db, true);
    return this.transaction((client) => this.flows.insert(nodes, existing, clientExecutor(client), true));
  }

  /**
   * The prepared-statement name of a hot statement (undefined when preparing is off). Planning
   * the claim cost about 0.7 ms per call, as much as running it (pg_stat_statements, bench/).
   * The name is derived from the text, so one name never stands for two texts on a connection.
   */
  private name(sql: string): string | undefined {
    if (!this.prepare) return undefined;
    let n = this.names.get(sql);
    if (!n) this.names.set(sql, (n = `pgq_${lockKey(sql).slice(0, 12)}`));
    return n;
  }

  /**
   * Inserts jobs with unique keys (and any others of the same call) in one statement; returns
   * the Job of each input, in input order: the new one, or the live one that holds its key, and
   * `inserted`: the inputs that made a new row (not those that found a live job, nor those that
   * replaced a waiting one: no job was added by them).
   */
  async insertUnique<T>(
    rows: readonly NewJobRow[],
    db: SqlExecutor = this.db,
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
    const sql = buildUniqueInsert(this.schema, replace, db === this.db);
    const [out] = await db.query<{ rows: [string, string | null, boolean][]; now: Date }>(sql, [
      rows.map((r) => r.payloadJson),
      ...insertColumns(rows),
      rows.map((r) => r.uniqueKey),
      this.channel,
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
      const found = await db.query<JobRow & { unique_key: string }>(this.q.liveByUniqueKey, [
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

  /** Inserts jobs in one statement; returns what the database assigned, in input order. */
  async insert(rows: readonly NewJobRow[], db: SqlExecutor = this.db): Promise<Inserted> {
    if (rows.length === 0) return { ids: [], now: new Date() };
    // Each column goes as one scalar when every row has the same value (the usual bulk: one
    // name, the queue's defaults), else as an array; no array is built for a scalar column.
    const arrays: boolean[] = [];
    const params: unknown[] = [null];
    const r0 = rows[0];
    // One pass of plain reads over the rows settles the usual bulk: every column a scalar.
    let uniform = true;
    for (let i = 1; uniform && i < rows.length; i++) uniform = sameColumns(rows[i], r0);
    for (const [col] of INSERT_COLUMNS) {
      const value = COLUMN_VALUE[col];
      const first = value(r0);
      let same = true;
      for (let i = 1; !uniform && same && i < rows.length; i++) same = sameValue(value(rows[i]), first);
      arrays.push(!same);
      params.push(same ? first : rows.map(value));
    }
    params.push(this.channel);
    // The payloads as one JSON array (buildInsert), unless too long for one jsonb value.
    let chars = 0;
    for (const r of rows) chars += r.payloadJson.length + 1;
    const payloads = chars <= JSONB_ARRAY_MAX_CHARS ? 'jsonb' : 'text[]';
    params[0] = payloads === 'jsonb' ? `[${rows.map((r) => r.payloadJson).join(',')}]` : rows.map((r) => r.payloadJson);
    // On the queue's own pool the insert forces a durable commit; in the caller's transaction it
    // leaves the commit to the caller.
    const durable = db === this.db;
    const key = (durable ? 'd' : 't') + payloads + arrays.map((a) => (a ? '1' : '0')).join('');
    let sql = this.insertSql.get(key);
    if (!sql) this.insertSql.set(key, (sql = buildInsert(this.schema, arrays, durable, payloads)));
    const [out] = await db.query<{ ids: string | null; now: Date }>(sql, params, this.name(sql));
    // '{1,2,3}' (NULL when nothing was inserted: a refused row throws, so only in theory).
    return { ids: out.ids === null || out.ids === '{}' ? [] : out.ids.slice(1, -1).split(','), now: out.now };
  }

  /**
   * One job without a unique key on the queue's own pool (add() outside a transaction). While
   * fewer than the pool's size are in flight it goes at once, alone; past that, adds wait and
   * leave together as one multi-row insert (the same statement as addBulk, durable) when an
   * insert in flight returns. So an idle app pays no delay, and under load many callers share
   * one statement and one WAL flush instead of queueing for the pool's connections one commit
   * at a time: 10 concurrent callers on the default pool of 4 stored ~2,900 adds/s one by one
   * against ~5,600/s for 10 prepared inserts on 10 connections (issue 13, bench/). Each caller
   * still resolves only once its row has committed. A batch the database refuses (a value of
   * one row, say) is retried row by row, so only the bad add fails; a lost connection fails
   * every add of the batch, as it would have failed each alone (committed or not: unknown).
   */
  insertCoalesced(row: NewJobRow): Promise<{ id: string; now: Date }> {
    if (this.singleInFlight < this.maxSingleInFlight) return this.sendSingles([row]).then((r) => r[0]);
    return new Promise((resolve, reject) => this.singleWaiting.push({ row, resolve, reject }));
  }

  private async sendSingles(rows: NewJobRow[]): Promise<{ id: string; now: Date }[]> {
    this.singleInFlight++;
    try {
      const { ids, now } = await this.insert(rows);
      return ids.map((id) => ({ id: String(id), now }));
    } finally {
      this.singleInFlight--;
      this.flushSingles();
    }
  }

  /** The adds that waited for an insert in flight: one statement for up to 1,000 of them. */
  private flushSingles(): void {
    if (this.singleWaiting.length === 0 || this.singleInFlight >= this.maxSingleInFlight) return;
    const batch = this.singleWaiting.splice(0, 1000);
    this.sendSingles(batch.map((w) => w.row)).then(
      (out) => batch.forEach((w, i) => w.resolve(out[i])),
      (err: Error) => {
        if (batch.length === 1 || !isRefusal(err)) return batch.forEach((w) => w.reject(err));
        // One row's value was refused: each alone, so only its own add fails.
        for (const w of batch) this.sendSingles([w.row]).then((r) => w.resolve(r[0]), w.reject);
      },
    );
  }

  claim(queue: string, limit: number, workerId: string, leaseMs: number): Promise<ClaimedRow[]> {
    return this.db.query<ClaimedRow>(this.q.claim, [queue, limit, workerId, leaseMs], this.name(this.q.claim));
  }

  /**
   * The claim restricted to jobs of priority >= `fromPriority` due within the last `windowMs`
   * (database clock): what stays fast while vacuum is held back (queries.ts, `claimSince`);
   * `outside`: the claim of every other due job (`claimOutside`).
   */
  claimSince(
    queue: string,
    limit: number,
    workerId: string,
    leaseMs: number,
    fromPriority: number,
    windowMs: number,
    side: 'inside' | 'outside' = 'inside',
  ): Promise<ClaimedRow[]> {
    const sql = side === 'inside' ? this.claimSinceSql : this.claimOutsideSql;
    return this.db.query<ClaimedRow>(sql, [queue, limit, workerId, leaseMs, fromPriority, Math.ceil(windowMs)], this.name(sql));
  }

  /**
   * The claim of a queue with globalConcurrency or a limiter: serialised across nodes by a
   * per-queue advisory lock, it claims no more than the limits allow. `retryInMs`: when the rate
   * limit is what stopped it, how long until a start is allowed again.
   */
  async claimLimited(
    queue: string,
    free: number,
    workerId: string,
    leaseMs: number,
    limits: { globalConcurrency: number | null; limiter: { max: number; durationMs: number } | null },
  ): Promise<{ rows: ClaimedRow[]; retryInMs: number | null }> {
    return this.transaction(async (client) => {
      await client.query(this.q.lockQueueClaims, [lockKey(`nestjs-pg-queue:limits:${this.schema}:${queue}`)]);
      const { limiter, globalConcurrency } = limits;
      const {
        rows: [st],
      } = await client.query<{ active: number; recent: number; next_free_ms: number | null }>(this.q.limitState, [
        queue,
        limiter?.durationMs ?? null,
      ]);
      let allowed = free;
      if (globalConcurrency !== null) allowed = Math.min(allowed, globalConcurrency - st.active);
      let retryInMs: number | null = null;
      if (limiter) {
        const left = limiter.max - st.recent;
        if (left < allowed) retryInMs = Math.max(1, Math.ceil(st.next_free_ms ?? limiter.durationMs));
        allowed = Math.min(allowed, left);
      }
      let rows: ClaimedRow[] = [];
      if (allowed > 0) {
        rows = (await client.query<ClaimedRow>(this.q.claim, [queue, allowed, workerId, leaseMs])).rows;
        if (limiter && rows.length)
          await client.query(this.q.recordStarts, [queue, rows.length, limiter.durationMs, limiter.max]);
      }
      return { rows, retryInMs };
    });
  }

  /**
   * Runs `fn` in a transaction on one pool connection: COMMIT after it, ROLLBACK if it throws.
   * A checked-out client has no error listener: a backend killed between two statements would
   * otherwise emit an unhandled 'error' and crash the process (the failed query reports it).
   */
  private async transaction<T>(fn: (client: PgPoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    client.on('error', ignoreError);
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.off('error', ignoreError);
      client.release();
    }
  }

  /**
   * Writes a batch of outcomes, one statement per kind present (run side by side, each its own
   * transaction). Returns the ids written, and the outcomes of each statement that failed with
   * its error: the other statements' rows are written all the same.
   */
  async settle<O extends Outcome>(outcomes: readonly O[], workerId: string): Promise<SettleResult<O>> {
    const groups: { outcomes: O[]; run: () => Promise<readonly { id: string }[]> }[] = [];
    const done = outcomes.filter((o) => o.kind === 'completed');
    const retry = outcomes.filter((o): o is O & Extract<Outcome, { kind: 'retry' }> => o.kind === 'retry');
    type Finished = Extract<Outcome, { kind: 'failed' | 'cancelled' }>;
    const failed = outcomes.filter((o): o is O & Finished => o.kind === 'failed');
    const cancelled = outcomes.filter((o): o is O & Finished => o.kind === 'cancelled');
    const snoozed = outcomes.filter((o): o is O & Extract<Outcome, { kind: 'snoozed' }> => o.kind === 'snoozed');
    if (done.length) {
      const ids = bigintArrayText(done.map((o) => o.id));
      const attempts = attemptParams(done);
      const resultParam = resultsByIdJson(done as Extract<Outcome, { kind: 'completed' }>[]);
      groups.push({
        outcomes: done,
        run: async () => {
          const [r] =
            this.retention.completedMs > 0
              ? await this.db.query<WrittenRow>(
                  this.q.completeArchive,
                  [ids, attempts.attempt, resultParam, workerId, attempts.byId],
                  this.name(this.q.completeArchive),
                )
              : await this.db.query<WrittenRow>(
                  this.q.completeDelete,
                  [ids, attempts.attempt, workerId, attempts.byId],
                  this.name(this.q.completeDelete),
                );
          return r.ids === null ? ALL : r.ids.map((id) => ({ id }));
        },
      });
    }
    if (retry.length) {
      groups.push({
        outcomes: retry,
        run: () =>
          this.db.query(this.q.retry, [
            retry.map((o) => o.id),
            retry.map((o) => o.attempt),
            retry.map((o) => o.errorJson),
            retry.map((o) => o.delayMs),
            workerId,
          ]),
      });
    }
    const dead = outcomes.filter((o): o is O & Extract<Outcome, { kind: 'dead-letter' }> => o.kind === 'dead-letter');
    for (const [dlq, list] of groupBy(dead, (o) => o.deadLetterQueue)) {
      groups.push({
        outcomes: list,
        run: () =>
          this.db.query(this.q.deadLetter, [
            list.map((o) => o.id),
            list.map((o) => o.attempt),
            list.map((o) => o.errorJson),
            workerId,
            dlq,
            this.channel,
          ]),
      });
    }
    for (const [state, list] of [
      ['failed', failed],
      ['cancelled', cancelled],
    ] as const) {
      if (list.length === 0) continue;
      groups.push({
        outcomes: list,
        run: () =>
          this.db.query(this.q.fail, [
            list.map((o) => o.id),
            list.map((o) => o.attempt),
            list.map((o) => o.errorJson),
            workerId,
            state,
          ]),
      });
    }
    if (snoozed.length) {
      groups.push({
        outcomes: snoozed,
        run: () =>
          this.db.query(this.q.snooze, [
            snoozed.map((o) => o.id),
            snoozed.map((o) => o.attempt),
            snoozed.map((o) => o.delayMs),
            workerId,
          ]),
      });
    }
    // Outcomes of a statement that wrote every row of its group are known by their group, with
    // no per-job bookkeeping; the others by id.
    const whole = new Set<string>();
    const byId = new Set<string>();
    const failures: { outcomes: O[]; error: Error }[] = [];
    await Promise.all(
      groups.map((g) =>
        g.run().then(
          (rows) => {
            if (rows === ALL) whole.add(groupKey(g.outcomes[0]));
            else for (const r of rows) byId.add(String(r.id));
          },
          (error: Error) => {
            failures.push({ outcomes: g.outcomes, error });
          },
        ),
      ),
    );
    if (whole.size === 0) return { written: (o) => byId.has(o.id), failures };
    return { written: (o) => whole.has(groupKey(o)) || byId.has(o.id), failures };
  }

  /**
   * Stores a running attempt's progress; false when no row matched (the lease is no longer this
   * worker's, or the job already finished): nothing was changed then.
   */
  async setProgressIfRunning(id: string, attempt: number, workerId: string, progressJson: string): Promise<boolean> {
    const rows = await this.db.query(this.q.setProgressIfRunning, [id, attempt, workerId, progressJson]);
    return rows.length > 0;
  }

  /** Milliseconds until the queue's next delayed job is due (database clock); null when none is. */
  async nextDueInMs(queue: string): Promise<number | null> {
    const [r] = await this.db.query<{ due_in_ms: number | null }>(this.q.nextDue, [queue]);
    return r?.due_in_ms ?? null;
  }

  /**
   * Renews leases and refreshes this node's row in the registry, in one statement; returns the
   * ids still held, and those of them whose cancel was asked.
   */
  async heartbeat(
    ids: readonly string[],
    workerId: string,
    leaseMs: number,
    node: NodeRow,
  ): Promise<{ kept: Set<string>; cancel: string[] }> {
    const rows = await this.db.query<{ id: string; cancel: boolean }>(
      this.q.heartbeat,
      [
        bigintArrayText(ids),
        workerId,
        leaseMs,
        node.host,
        node.pid,
        node.startedAt,
        node.heartbeatMs,
        JSON.stringify(node.queues),
      ],
      this.name(this.q.heartbeat),
    );
    return { kept: new Set(rows.map((r) => String(r.id))), cancel: rows.filter((r) => r.cancel).map((r) => String(r.id)) };
  }

  /** Removes this node from the registry (clean shutdown). */
  async removeNode(workerId: string): Promise<void> {
    await this.db.query(this.q.removeNode, [workerId]);
  }

  /**
   * Cancels a live job: 'cancelled' (it was waiting), 'cancelling' (it runs: its node is told),
   * or null (no live job of that queue has this id: unknown, or already finished).
   */
  async cancel(queue: string, id: string, db: SqlExecutor = this.db): Promise<'cancelled' | 'cancelling' | null> {
    // One statement that locks the row first: a claim or outcome committing meanwhile cannot
    // make it miss the job (see the query), so there is nothing to run again.
    const [r] = await db.query<{ cancelled: number; cancelling: number }>(this.q.cancel, [id, queue, this.channel]);
    if (r.cancelled > 0) return 'cancelled';
    if (r.cancelling > 0) return 'cancelling';
    return null;
  }

  /** Failed or cancelled jobs back to waiting (ids; or null: every failed job). Returns how many. */
  async retryFinished(queue: string, ids: string[] | null, db: SqlExecutor = this.db): Promise<number> {
    let total = 0;
    for (;;) {
      const [r] = await db.query<{ n: number }>(this.q.retryFinished, [ids, queue, 1000, this.channel]);
      total += r.n;
      if (ids !== null || r.n < 1000) return total;
    }
  }

  /** Deletes a waiting or finished job; false when there was none (or it is running). */
  async remove(queue: string, id: string, db: SqlExecutor = this.db): Promise<boolean> {
    const [r] = await db.query<{ n: string }>(this.q.remove, [id, queue]);
    return Number(r.n) > 0;
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
      this.retention.completedMs > 0,
    ]);
    return r.n > 0;
  }

  /** Enqueues one tick of a schedule unless a node already did; true when this call did. */
  async enqueueTick(key: string, tick: Date, row: NewJobRow): Promise<boolean> {
    const [r] = await this.db.query<{ inserted: number }>(this.q.enqueueTick, [
      key,
      tick,
      row.queue,
      row.name,
      row.payloadJson,
      row.maxAttempts,
      row.backoff ? JSON.stringify(row.backoff) : null,
      row.timeoutMs,
      row.priority,
      this.channel,
    ]);
    return r.inserted > 0;
  }

  /** The last tick enqueued for a schedule, or null before its first. */
  async lastTick(key: string): Promise<Date | null> {
    const rows = await this.db.query<{ last_tick: Date }>(this.q.lastTick, [key]);
    return rows.length ? rows[0].last_tick : null;
  }

  async setPaused(queue: string, paused: boolean): Promise<void> {
    await this.db.query(this.q.setPaused, [queue, paused, this.channel]);
  }

  async isPaused(queue: string): Promise<boolean> {
    const [r] = await this.db.query<{ paused: boolean }>(this.q.isPaused, [queue]);
    return r.paused;
  }

  async handBack(ids: readonly string[], workerId: string): Promise<number> {
    if (ids.length === 0) return 0;
    return (await this.db.query(this.q.handBack, [ids, workerId, this.channel])).length;
  }

  /**
   * One maintenance pass, on one node at a time (a transaction-scoped advisory lock elects it,
   * which also works through PgBouncer in transaction mode). Returns null when another node has it.
   */
  async maintain(batch: number): Promise<{ stalled: StalledJob[]; pruned: number } | null> {
    return this.transaction(async (client) => {
      const { rows } = await client.query<{ locked: boolean }>(this.q.tryMaintenanceLock, [
        lockKey(`nestjs-pg-queue:maintenance:${this.schema}`),
      ]);
      if (!rows[0].locked) return null;
      const r = await client.query<{ id: string; queue: string; name: string; attempt: number; retried: boolean }>(
        this.q.rescue,
        [batch, this.channel],
      );
      const pruned = await this.pruneHistory(client, batch);
      await client.query(this.q.pruneNodes);
      // Edges of flows whose parent is gone from both tables, past the shortest retention.
      const { completedMs: c, cancelledMs: x, failedMs: f } = this.retention;
      await client.query(this.flows.q.pruneDependencies, [Math.min(c, x, f ?? Infinity), batch]);
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
   * HistoryPartitions). Completed and cancelled jobs are deleted row by row only where no
   * partition drop will take them: in the pre-version-10 table and the default partition, and
   * everywhere for a state whose retention is shorter than a partition. Failed jobs, which
   * live in their own partition, are always deleted row by row (retention.failedMs).
   */
  private async pruneHistory(client: PgPoolClient, batch: number): Promise<number> {
    const { completedMs, cancelledMs, failedMs } = this.retention;
    const [layout] = (await client.query<{ current: boolean; legacy: boolean }>(this.q.historyLayout)).rows;
    const completed = completedMs > 0 ? completedMs : null;
    if (!layout.current) {
      // The history from before version 10, not converted yet: retention as it always was.
      return (await client.query(this.q.prune, [completed, batch, cancelledMs, failedMs])).rowCount ?? 0;
    }
    const rowByRow = (ms: number | null): number | null => (ms !== null && ms < this.historyPartitionMs ? ms : null);
    const byDrop = (ms: number | null): number | null => (ms !== null && ms >= this.historyPartitionMs ? ms : null);
    let n = (await client.query(this.q.prune, [rowByRow(completed), batch, rowByRow(cancelledMs), failedMs])).rowCount ?? 0;
    const rest = [byDrop(completed), batch, byDrop(cancelledMs)];
    if (rest[0] !== null || rest[2] !== null) {
      if (layout.legacy) n += (await client.query(this.q.pruneLegacy, [...rest, null])).rowCount ?? 0;
      n += (await client.query(this.q.pruneDoneDefault, [...rest, null])).rowCount ?? 0;
    }
    return n;
  }

  /**
   * Dead and live row versions of the jobs table (statistics, about a second old), and its size
   * in pages: now, and as the last VACUUM or ANALYZE recorded it.
   */
  async jobsTableTuples(): Promise<JobsTableSize> {
    const { rows } = await this.pool.query<{ dead: number; live: number; pages: number; recorded_pages: number }>(
      this.q.jobsTableTuples,
      [`${escapeIdentifier(this.schema)}.jobs`],
    );
    const r = rows[0];
    return r
      ? { dead: r.dead, live: r.live, pages: r.pages, recordedPages: r.recorded_pages }
      : { dead: 0, live: 0, pages: 0, recordedPages: 0 };
  }

  /** VACUUM of the jobs table, on a pool connection (never inside a transaction). */
  async vacuumJobs(): Promise<void> {
    await this.pool.query(this.q.vacuumJobs);
  }

  /** ANALYZE of the jobs table: new statistics, and every cached plan on it made again. */
  async analyzeJobs(): Promise<void> {
    await this.pool.query(this.q.analyzeJobs);
  }

  /** Figures per queue (all queues, or one). */
  async counts(queue: string | null): Promise<Map<string, QueueCounts>> {
    const rows = await this.db.query<{
      queue: string;
      waiting: number;
      delayed: number;
      active: number;
      stalled: number;
      failed: number;
      waiting_children: number;
      oldest_waiting_age_ms: number | null;
    }>(this.q.counts, [queue]);
    return new Map(
      rows.map((r) => [
        r.queue,
        {
          waiting: r.waiting,
          delayed: r.delayed,
          active: r.active,
          stalled: r.stalled,
          failed: r.failed,
          waitingChildren: r.waiting_children,
          oldestWaitingAgeMs: r.oldest_waiting_age_ms === null ? null : Math.max(0, Math.round(r.oldest_waiting_age_ms)),
        },
      ]),
    );
  }

  /** The worker processes (nodes) that heartbeat into this schema now: seen within 3 of their intervals. */
  async liveNodeIds(): Promise<string[]> {
    return (await this.db.query<{ id: string }>(this.q.liveNodeIds, [])).map((r) => r.id);
  }

  /** Tests only: makes the waiting jobs of `queue` (null: all) that are due later due now; returns how many. */
  async makeDueWaiting(queue: string | null): Promise<number> {
    const { rowCount } = await this.pool.query(this.q.makeDueWaiting, [queue]);
    return rowCount ?? 0;
  }

  /**
   * Runs a read by id in the statement for the history's layout (history-by-id.ts); a table gone
   * since the layout was remembered (dropped by hand) makes it ask again, once.
   */
  private async byId<R>(run: () => Promise<R>): Promise<R> {
    try {
      return await run();
    } catch (err) {
      if (!isUndefinedTable(err)) throw err;
      this.layout.forget();
      return run();
    }
  }

  async getJob<T>(id: string, db: SqlExecutor = this.db): Promise<Job<T> | null> {
    if (!isJobId(id)) return null;
    // Prepared on the queue's own pool: by id, no partition of the history can be pruned, so a
    // plan is the same for every id, and planning one over 35 partitions cost 0.44 ms, four
    // times the lookup (bench/history-retention.mjs).
    const rows = await this.byId(() =>
      this.layout.read(this.q.getJobIn, id, (sql, values) =>
        db.query<JobRow>(sql, values, db === this.db ? this.name(sql) : undefined),
      ),
    );
    if (!rows.length) return null;
    const job = rowToJob<T>(rows[0]);
    // A second read (four index probes), kept out of getJob's statement: parents and dependencies.
    const flow = await this.flows.flowOf(id, db);
    return flow ? { ...job, flow } : job;
  }
}

function ignoreError(): void {}

function groupBy<T, K>(items: readonly T[], key: (t: T) => K): Map<K, T[]> {
  const m = new Map<K, T[]>();
  for (const i of items) {
    const k = key(i);
    const list = m.get(k);
    if (list) list.push(i);
    else m.set(k, [i]);
  }
  return m;
}

/**
 * The longest payloads of one insert (JSON characters, with a separator each) sent as one jsonb
 * array; longer calls send a text[] instead. A jsonb value holds at most 256 MiB (2^28 - 1
 * bytes), and its binary form can be several times its text for arrays of small numbers (a 4-byte
 * entry and a numeric per `1,`): 16 Mi characters stays far below that. A text[] has the 1 GiB
 * limit of any value.
 */
export const JSONB_ARRAY_MAX_CHARS = 16 * 1024 * 1024;

/** The value of each INSERT_COLUMNS column for a row: a column without one does not compile. */
const COLUMN_VALUE: Record<InsertColumn, (r: NewJobRow) => unknown> = {
  queue: (r) => r.queue,
  name: (r) => r.name,
  priority: (r) => r.priority,
  run_at: (r) => r.runAt,
  delay_ms: (r) => r.delayMs,
  max_attempts: (r) => r.maxAttempts,
  backoff: (r) => (r.backoff ? JSON.stringify(r.backoff) : null),
  timeout_ms: (r) => r.timeoutMs,
  trace: (r) => r.traceJson,
};

/**
 * True when `a` and `b` have the same value in every INSERT_COLUMNS column (a false "no" only
 * costs arrays): one pass of plain reads, where asking each column's COLUMN_VALUE of each row
 * was a sixth of addBulk's JS. test/unit/insert-params.spec.ts checks it sees every column.
 */
export function sameColumns(a: NewJobRow, b: NewJobRow): boolean {
  return (
    a.queue === b.queue &&
    a.name === b.name &&
    a.priority === b.priority &&
    sameValue(a.runAt, b.runAt) &&
    a.delayMs === b.delayMs &&
    a.maxAttempts === b.maxAttempts &&
    a.backoff === b.backoff &&
    a.timeoutMs === b.timeoutMs &&
    a.traceJson === b.traceJson
  );
}

/** The values of INSERT_COLUMNS (queries.ts), one array per column, in its order. */
export function insertColumns(rows: readonly NewJobRow[]): unknown[][] {
  return INSERT_COLUMNS.map(([col]) => rows.map(COLUMN_VALUE[col]));
}
