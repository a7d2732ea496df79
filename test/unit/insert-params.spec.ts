import { insertColumns } from '../../lib/db/job-store';
import { buildInsert, buildUniqueInsert, INSERT_COLUMNS, INSERT_PARAMS } from '../../lib/db/queries';
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
