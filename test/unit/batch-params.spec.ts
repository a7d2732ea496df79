import { attemptParams, bigintArrayText, resultsByIdJson } from '../../lib/db/batch-params';

// The completions' batch parameters (lib/db/batch-params.ts): what the statements in
// lib/db/outcomes.ts read. test/integration/batch-outcomes.int-spec.ts runs them on PostgreSQL.

describe('batch outcome parameters', () => {
  it('writes job ids as the text of a bigint[] literal', () => {
    expect(bigintArrayText(['1', '22', '9223372036854775807'])).toBe('{1,22,9223372036854775807}');
    expect(bigintArrayText(['5'])).toBe('{5}');
    expect(bigintArrayText([])).toBe('{}');
  });

  it('sends one attempt for a batch all on the same attempt, and a JSON object of each id otherwise', () => {
    const o = (id: string, attempt: number) => ({ id, attempt });
    expect(attemptParams([o('1', 1), o('2', 1), o('3', 1)])).toEqual({ attempt: 1, byId: null });
    expect(attemptParams([o('9', 3)])).toEqual({ attempt: 3, byId: null });
    const mixed = attemptParams([o('1', 1), o('2', 2), o('3', 1)]);
    expect(mixed).toEqual({ attempt: null, byId: '{"1":1,"2":2,"3":1}' });
    expect(JSON.parse(mixed.byId!)).toEqual({ 1: 1, 2: 2, 3: 1 });
    expect(attemptParams([])).toEqual({ attempt: null, byId: null });
  });

  it('writes results as one JSON object keyed by id, leaving out jobs without one', () => {
    const r = resultsByIdJson([
      { id: '1', resultJson: '{"a":[1,2]}' },
      { id: '2', resultJson: null },
      { id: '3', resultJson: 'null' },
      { id: '4', resultJson: '"text"' },
    ]);
    expect(r).toBe('{"1":{"a":[1,2]},"3":null,"4":"text"}');
    expect(JSON.parse(r!)).toEqual({ 1: { a: [1, 2] }, 3: null, 4: 'text' });
    expect(resultsByIdJson([{ id: '7', resultJson: '0' }])).toBe('{"7":0}');
  });

  it('sends NULL when no job of the batch has a result', () => {
    expect(
      resultsByIdJson([
        { id: '1', resultJson: null },
        { id: '2', resultJson: null },
      ]),
    ).toBeNull();
    expect(resultsByIdJson([])).toBeNull();
  });
});
