import { attemptsParam, bigintArrayText, resultsByIdJson } from '../../lib/db/batch-params';

// The completions' batch parameters (lib/db/batch-params.ts): what the statements in
// lib/db/queries.ts read. test/integration/batch-outcomes.int-spec.ts runs them on PostgreSQL.

describe('batch outcome parameters', () => {
  it('writes job ids as the text of a bigint[] literal', () => {
    expect(bigintArrayText(['1', '22', '9223372036854775807'])).toBe('{1,22,9223372036854775807}');
    expect(bigintArrayText(['5'])).toBe('{5}');
    expect(bigintArrayText([])).toBe('{}');
  });

  it('sends one attempt for a batch all on the same attempt, and every attempt otherwise', () => {
    expect(attemptsParam([1, 1, 1, 1])).toEqual([1]);
    expect(attemptsParam([3])).toEqual([3]);
    expect(attemptsParam([1, 1, 2, 1])).toEqual([1, 1, 2, 1]);
    expect(attemptsParam([2, 1])).toEqual([2, 1]);
    expect(attemptsParam([])).toEqual([]);
  });

  it('never hands back the caller array itself', () => {
    const mixed = [1, 2];
    expect(attemptsParam(mixed)).not.toBe(mixed);
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
