import { nameProblem, quote, shorten, shortenMiddle, textProblem } from '../../lib/core/input-text';

// Error messages quote what the caller passed briefly and printably, and say what is wrong.
describe('quote', () => {
  it.each<[string, unknown, string]>([
    ['a short string, as JSON', 'email', '"email"'],
    ['a NUL, escaped', 'a\u0000b', '"a\\u0000b"'],
    ['half a surrogate pair, escaped', '😀'.slice(0, 1), '"\\ud83d"'],
    ['a long string, cut and counted', 'x'.repeat(10_000), `"${'x'.repeat(60)}"… (10000 characters)`],
    ['a number', 42, '42'],
    ['-0', -0, '-0'],
    ['NaN', NaN, 'NaN'],
    ['a BigInt', 10n, '10n'],
    ['a symbol', Symbol('s'), 'Symbol(s)'],
    ['a named function', function handler() {}, 'a function (handler)'],
    ['undefined', undefined, 'undefined'],
    ['null', null, 'null'],
    ['an array, by its length', [1, 2, 3], 'an array of 3'],
    ['an invalid Date', new Date('x'), 'an invalid Date'],
    ['an object, as short JSON', { type: 'linear' }, '{"type":"linear"}'],
    ['an object JSON cannot print', { n: 1n }, '[object Object]'],
  ])('%s', (_what, value, shown) => {
    expect(quote(value)).toBe(shown);
  });

  it('never throws, even on a getter that does', () => {
    const o = {
      get x(): number {
        throw new Error('no');
      },
    };
    expect(quote(o)).toBe('[object Object]');
  });

  it('shortens long text', () => {
    expect(shorten('a, b', 10)).toBe('a, b');
    expect(shorten('y'.repeat(500), 10)).toBe(`${'y'.repeat(10)}… (500 characters)`);
  });
});

describe('shortenMiddle', () => {
  it('keeps a short text whole, and both ends of a long one with its length', () => {
    expect(shortenMiddle('payload.a', 40)).toBe('payload.a');
    expect(shortenMiddle('payload' + '[0]'.repeat(300), 40)).toBe('payload[0][0][0][0][…0][0][0][0][0][0][0] (907 characters)');
  });

  it('never cuts a surrogate pair in two', () => {
    const out = shortenMiddle('😀'.repeat(100), 41);
    expect(textProblem(out)).toBeNull(); // no lone surrogate
    expect(out).toMatch(/^(😀)+…(😀)+ \(200 characters\)$/);
  });
});

describe('what PostgreSQL cannot store in a name', () => {
  it.each<[string, unknown, RegExp | null]>([
    ['a plain name', 'welcome', null],
    ['a whole emoji', 'ok 😀', null],
    ['a NUL in a short name: a NUL problem, not a length one', 'a\u0000b', /^it contains a NUL character \(\\u0000\) at index 1/],
    ['a lone surrogate', 'x' + '😀'.slice(1), /^it contains a lone UTF-16 surrogate \(\\ude00\) at index 1/],
    ['a long name', 'n'.repeat(201), /^it is 201 characters long, over the limit of 200$/],
    ['an empty name', '', /^it is empty$/],
    ['not a string', 7, /^expected a string, got number$/],
    ['null', null, /^expected a string, got null$/],
  ])('%s', (_what, value, problem) => {
    const got = nameProblem(value, 200);
    if (problem === null) expect(got).toBeNull();
    else expect(got).toMatch(problem);
  });

  it('textProblem finds the first unstorable character', () => {
    expect(textProblem('😀😀')).toBeNull();
    expect(textProblem('ab\u0000' + '😀'.slice(0, 1))).toMatch(/NUL character .* at index 2/);
  });
});
