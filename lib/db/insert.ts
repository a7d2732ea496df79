import { escapeIdentifier } from 'pg';
import type { SqlExecutor } from './executor';
import type { NewJobRow } from './new-job';
import { DURABLE, type StoreContext } from './store-context';

/** What the insert returns: the new ids in input order, and the transaction's clock. */
export interface Inserted {
  ids: string[];
  now: Date;
}

/**
 * The insert's per-job columns after the payload, in parameter order ($2 ...). The parameters
 * after them (unique key, channel) are numbered from this list's length, never written as
 * literals: a column added here moves them with it (test/unit/insert-params.spec.ts checks).
 */
export const INSERT_COLUMNS = [
  ['queue', 'text'],
  ['name', 'text'],
  ['priority', 'int'],
  ['run_at', 'timestamptz'],
  ['delay_ms', 'bigint'],
  ['max_attempts', 'int'],
  ['backoff', 'text'],
  ['timeout_ms', 'int'],
  ['trace', 'text'],
  ['group_key', 'text'],
] as const;

/** A column of INSERT_COLUMNS. */
export type InsertColumn = (typeof INSERT_COLUMNS)[number][0];

/** The bind parameters of each insert, by position: what the store sends, and the SQL reads. */
export const INSERT_PARAMS = {
  /** The plain insert: $1 payload, then INSERT_COLUMNS, then the NOTIFY channel. */
  insert: { count: INSERT_COLUMNS.length + 2, channel: INSERT_COLUMNS.length + 2 },
  /** The unique insert: $1 payload, then INSERT_COLUMNS, then unique_key, then the channel. */
  unique: { count: INSERT_COLUMNS.length + 3, uniqueKey: INSERT_COLUMNS.length + 2, channel: INSERT_COLUMNS.length + 3 },
} as const;

/**
 * The bulk insert: one statement whatever the number of jobs, plus one NOTIFY per queue riding
 * in the caller's transaction, so it is delivered only on commit; its payload `queue|ms` says how
 * soon the earliest new job is due (0 = now). Payloads always travel together in $1; each
 * other column travels as an array only when its values differ within the call, else as one
 * scalar: parsing nine 1,000-element arrays cost about twice the insert itself (measured:
 * 23 ms vs 12 ms per 1,000 jobs). `arrays[i]` says whether INSERT_COLUMNS[i] is an array; the
 * arrays are zipped with the payloads by ROWS FROM, in input order.
 * `durable`: the insert runs on the queue's own pool, so it forces `synchronous_commit` on (DURABLE).
 *
 * `payloads`: how $1 carries them. `'jsonb'` (the usual case): one JSON array of every payload,
 * `[p1,p2,...]`, split by `jsonb_array_elements`. Against a `text[]` of JSON texts this spares
 * the client pg's quoting of every element into an array literal (0.14 ms per 1,000 small
 * payloads) and the server that literal's parse before each element's own: EXPLAIN ANALYZE of
 * 1,000 small jobs on PostgreSQL 15, median of 41, 3.24 ms with the whole statement as it is now
 * against 3.52 ms as it was (text[], and the wake-up grouped from every row). `'text[]'`: one
 * JSON text per job, each cast alone, for calls too long for one jsonb value (JobStore.insert
 * decides: JSONB_ARRAY_MAX_CHARS).
 * Every piece of this SQL is from the fixed vocabulary above; values are bind parameters.
 */
export function buildInsert(
  schema: string,
  arrays: readonly boolean[],
  durable: boolean,
  payloads: 'jsonb' | 'text[]' = 'jsonb',
): string {
  const from = [payloads === 'jsonb' ? 'pg_catalog.jsonb_array_elements($1::jsonb)' : 'pg_catalog.unnest($1::text[])'];
  const alias = ['payload'];
  const expr: Record<string, string> = {};
  INSERT_COLUMNS.forEach(([col, type], i) => {
    const p = `$${i + 2}`;
    if (arrays[i]) {
      from.push(`pg_catalog.unnest(${p}::${type}[])`);
      alias.push(col);
      expr[col] = `t.${col}`;
    } else {
      expr[col] = `${p}::${type}`;
    }
  });
  const runAt = `coalesce(${expr.run_at}, now() + ${expr.delay_ms}::float8 * interval '1 millisecond')`;
  // One queue and one due time for the whole call (addBulk at its defaults, say): the wake-up
  // is worked out once from the parameters, not grouped from every inserted row (measured:
  // 0.1-0.2 ms less per 1,000 jobs, EXPLAIN ANALYZE on PostgreSQL 15).
  const oneWake = !arrays[0] && !arrays[3] && !arrays[4];
  const due = (at: string) =>
    `greatest(0, pg_catalog.ceil(extract(epoch FROM ${at} - now())::float8 * 1000::float8))::bigint::text`;
  const channel = `$${INSERT_PARAMS.insert.channel}`;
  return `
    WITH ins AS (
      INSERT INTO ${escapeIdentifier(schema)}.jobs (queue, name, payload, priority, run_at, max_attempts, backoff, timeout_ms, trace, group_key)
      SELECT ${expr.queue}, ${expr.name}, t.payload${payloads === 'jsonb' ? '' : '::jsonb'}, ${expr.priority},
             ${runAt}, ${expr.max_attempts}, ${expr.backoff}::jsonb, ${expr.timeout_ms}, ${expr.trace}::jsonb, ${expr.group_key}
      FROM ROWS FROM (${from.join(', ')}) AS t(${alias.join(', ')}) ${durable ? `WHERE ${DURABLE}` : ''}
      RETURNING ${oneWake ? 'id' : 'id, queue, run_at'}
    ), wake AS (${
      oneWake
        ? `
      SELECT pg_catalog.pg_notify(${channel}, ${expr.queue} || '|' || ${due(runAt)})`
        : `
      SELECT pg_catalog.pg_notify(${channel}, queue || '|' || ${due('pg_catalog.min(run_at)')})
      FROM ins GROUP BY queue`
    }
    )
    -- One row back, whatever the count: decoding 1,000 rows of timestamps cost the producer more
    -- than the insert itself. Identity values are assigned in input order. The ids travel as the
    -- text of a bigint[], '{1,2,3}', which the client splits natively (pg would parse a bigint[]
    -- element by element in JavaScript, 0.1 ms per 1,000; string_agg cost the server more).
    SELECT pg_catalog.array_agg(id ORDER BY id)::text AS ids, now() AS now, (SELECT count(*) FROM wake) AS woken
    FROM ins`;
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
  group_key: (r) => r.group,
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
    a.traceJson === b.traceJson &&
    a.group === b.group
  );
}

/** The values of INSERT_COLUMNS, one array per column, in its order. */
export function insertColumns(rows: readonly NewJobRow[]): unknown[][] {
  return INSERT_COLUMNS.map(([col]) => rows.map(COLUMN_VALUE[col]));
}

function sameValue(a: unknown, b: unknown): boolean {
  return a instanceof Date && b instanceof Date ? a.getTime() === b.getTime() : a === b;
}

/** The plain insert (buildInsert): its texts are built once per shape of call and kept. */
export class Inserts {
  private readonly sqlByShape = new Map<string, string>();

  constructor(private readonly ctx: StoreContext) {}

  /** Inserts jobs in one statement; returns what the database assigned, in input order. */
  async insert(rows: readonly NewJobRow[], db: SqlExecutor = this.ctx.db): Promise<Inserted> {
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
    params.push(this.ctx.channel);
    // The payloads as one JSON array (buildInsert), unless too long for one jsonb value.
    let chars = 0;
    for (const r of rows) chars += r.payloadJson.length + 1;
    const payloads = chars <= JSONB_ARRAY_MAX_CHARS ? 'jsonb' : 'text[]';
    params[0] = payloads === 'jsonb' ? `[${rows.map((r) => r.payloadJson).join(',')}]` : rows.map((r) => r.payloadJson);
    // On the queue's own pool the insert forces a durable commit; in the caller's transaction it
    // leaves the commit to the caller.
    const durable = db === this.ctx.db;
    const key = (durable ? 'd' : 't') + payloads + arrays.map((a) => (a ? '1' : '0')).join('');
    let sql = this.sqlByShape.get(key);
    if (!sql) this.sqlByShape.set(key, (sql = buildInsert(this.ctx.schema, arrays, durable, payloads)));
    const [out] = await db.query<{ ids: string | null; now: Date }>(sql, params, this.ctx.name(sql));
    // '{1,2,3}' (NULL when nothing was inserted: a refused row throws, so only in theory).
    return { ids: out.ids === null || out.ids === '{}' ? [] : out.ids.slice(1, -1).split(','), now: out.now };
  }
}
