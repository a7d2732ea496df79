import { CLAIMED_COLUMNS, claimedRows } from '../../lib/db/claim';

// The claim's rows come as arrays and are read by position (lib/db/claim.ts): the columns the
// statement returned must be CLAIMED_COLUMNS, in order, or the claim fails instead of handing a
// handler a job whose fields are shifted. The real statement runs in every integration test.
const columns = CLAIMED_COLUMNS.map((name) => ({ name }));
const values = CLAIMED_COLUMNS.map((name) => `v:${name}`);

describe('claimedRows: the claim read by position', () => {
  it('puts each value under its column', () => {
    const [row] = claimedRows([values], columns);
    for (const name of CLAIMED_COLUMNS) expect(row[name]).toBe(`v:${name}`);
    expect(Object.keys(row)).toEqual([...CLAIMED_COLUMNS]);
  });

  it('refuses columns out of step with the reader, naming both lists', () => {
    const swapped = [...columns];
    [swapped[1], swapped[2]] = [swapped[2], swapped[1]];
    expect(() => claimedRows([values], swapped)).toThrow(/returned columns \(id, payload, name,.*expected \(id, name, payload,/);
    expect(() => claimedRows([values], columns.slice(1))).toThrow(/expected/);
  });

  it('answers an empty claim without looking at its columns', () => {
    expect(claimedRows([], [])).toEqual([]);
  });
});
