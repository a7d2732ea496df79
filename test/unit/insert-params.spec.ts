import { buildInsert, insertColumns, INSERT_COLUMNS, INSERT_PARAMS, sameColumns } from '../../lib/db/insert';
import { buildUniqueInsert } from '../../lib/db/insert-unique';
import type { NewJobRow } from '../../lib/db/new-job';
import { jobRow } from '../support/job-row';

// The inserts' bind parameters are numbered from INSERT_COLUMNS: the NOTIFY channel (and the
// unique key) come after the columns. A literal `$N` that a new column shifted would send the
// channel name into a column, or a column into pg_notify, with no error until it ran.

/** The numbers of every `$N` in a statement. */
const params = (sql: string) => new Set([...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
const oneTo = (n: number) => new Set(Array.from({ length: n }, (_, i) => i + 1));

const row = jobRow();

describe('insert parameters', () => {
  it('the store sends one array per INSERT_COLUMNS column, in its order', () => {
    expect(insertColumns([row, { ...row, name: 'm' }]).length).toBe(INSERT_COLUMNS.length);
    expect(insertColumns([row, { ...row, name: 'm' }])[INSERT_COLUMNS.findIndex(([c]) => c === 'name')]).toEqual(['n', 'm']);
  });

  // The insert sends a column as one scalar when sameColumns says every row agrees: a column it
  // did not compare would be sent as the first row's value for all of them.
  const differing: Partial<NewJobRow>[] = [
    { queue: 'q2' },
    { name: 'm' },
    { priority: 1 },
    { runAt: new Date(0) },
    { delayMs: 5 },
    { maxAttempts: 4 },
    { backoff: { type: 'fixed', delayMs: 1, maxDelayMs: 1, jitter: false } },
    { timeoutMs: 10 },
    { traceJson: '{"traceparent":"00-1-2-01"}' },
    { group: 'tenant-1' },
  ];
  it.each(differing)('sameColumns sees a row that differs in %o', (over) => {
    expect(sameColumns(row, jobRow())).toBe(true);
    expect(sameColumns(row, jobRow({ payload: { other: 1 } }))).toBe(true);
    expect(sameColumns(row, jobRow(over))).toBe(false);
    expect(sameColumns(jobRow(over), row)).toBe(false);
  });
  it('those rows differ in every INSERT_COLUMNS column, one column each', () => {
    const changed = differing.map((over) => {
      const a = insertColumns([row, jobRow(over)]);
      return INSERT_COLUMNS.filter((_, i) => a[i][0] !== a[i][1] && !(a[i][0] instanceof Date)).map(([c]) => c);
    });
    // run_at: null against a Date; every other column's two values differ as primitives.
    expect(changed.map((c) => c.length)).toEqual(differing.map(() => 1));
    expect(new Set(changed.flat())).toEqual(new Set(INSERT_COLUMNS.map(([c]) => c)));
  });

  it.each([
    ['every column an array', INSERT_COLUMNS.map(() => true)],
    ['every column a scalar', INSERT_COLUMNS.map(() => false)],
    ['mixed', INSERT_COLUMNS.map((_, i) => i % 2 === 0)],
  ])('the plain insert (%s) reads exactly $1..$N, the channel last', (_what, arrays) => {
    for (const durable of [false, true])
      for (const payloads of ['jsonb', 'text[]'] as const)
        expect(params(buildInsert('pgqueue', arrays, durable, payloads))).toEqual(oneTo(INSERT_PARAMS.insert.count));
    expect(buildInsert('pgqueue', arrays, true, 'jsonb')).toContain('jsonb_array_elements($1::jsonb)');
    expect(buildInsert('pgqueue', arrays, true, 'text[]')).toContain('unnest($1::text[])');
    const sql = buildInsert('pgqueue', arrays, true);
    // payload, the columns, the channel: what JobStore.insert sends.
    expect(INSERT_PARAMS.insert.count).toBe(1 + insertColumns([row]).length + 1);
    expect(params(sql)).toEqual(oneTo(INSERT_PARAMS.insert.count));
    expect(sql).toContain(`pg_notify($${INSERT_PARAMS.insert.channel}, `);
    expect(INSERT_PARAMS.insert.channel).toBe(INSERT_PARAMS.insert.count);
  });

  it.each([false, true])(
    'the unique insert (replaceWaiting %s) reads exactly $1..$N: columns, unique key, channel',
    (replace) => {
      expect(params(buildUniqueInsert('pgqueue', replace, false))).toEqual(oneTo(INSERT_PARAMS.unique.count));
      const sql = buildUniqueInsert('pgqueue', replace, true);
      // payload, the columns, unique_key, the channel: what JobStore.insertUnique sends.
      expect(INSERT_PARAMS.unique.count).toBe(1 + insertColumns([row]).length + 2);
      expect(params(sql)).toEqual(oneTo(INSERT_PARAMS.unique.count));
      expect(sql).toContain(`$${INSERT_PARAMS.unique.uniqueKey}::text[]`);
      expect(sql).toContain(`pg_notify($${INSERT_PARAMS.unique.channel}, `);
      expect(INSERT_PARAMS.unique.channel).toBe(INSERT_PARAMS.unique.count);
    },
  );
});
