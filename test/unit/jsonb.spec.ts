import { MAX_JSON_DEPTH, toJsonText, toStorableJson, UnstorableJsonError } from '../../lib/db/jsonb';

// What a payload or a result may hold: toJsonText writes exactly what JSON.stringify would, or
// refuses what JSON (or PostgreSQL's jsonb) would store as something else, naming where it is.
// The integration suites (bad-input, edge-input) show the same through add() and handlers.

class Money {
  constructor(
    readonly amount: number,
    readonly currency: string,
  ) {}
  toJSON() {
    return `${this.amount} ${this.currency}`;
  }
}
class Dto {
  id = 7;
  name = 'x';
  greet() {
    return 'hi';
  }
}

function refusal(value: unknown, root = 'payload'): UnstorableJsonError {
  try {
    toJsonText(value, root);
  } catch (err) {
    if (err instanceof UnstorableJsonError) return err;
    throw err;
  }
  throw new Error(`toJsonText accepted ${String(value)}`);
}

describe('toJsonText: JSON jsonb stores exactly as passed', () => {
  const sparse: unknown[] = [1];
  sparse[2] = 3;
  const cyclic: Record<string, unknown> = { a: { b: [1] } };
  (cyclic.a as Record<string, unknown[]>).b.push(cyclic);
  const throwingGetter = {
    ok: 1,
    get bad(): number {
      throw new Error('not loaded');
    },
  };
  const symbolKeyed = { a: 1, [Symbol('meta')]: 2 };
  const badToJson = {
    toJSON() {
      throw new Error('nope');
    },
  };
  const nulKey = { ['a\u0000b']: 1 };

  it.each<[string, unknown, string, RegExp]>([
    ['a function', { items: [{ price: 1, f: () => 1 }] }, 'payload.items[0].f', /is a function/],
    ['a function at the root', () => 1, 'payload', /is a function/],
    ['a symbol value', { s: Symbol('x') }, 'payload.s', /is a symbol/],
    ['a Map', { m: new Map([['a', 1]]) }, 'payload.m', /is a Map, which JSON stores as \{\}/],
    ['a Set', [new Set([1])], 'payload[0]', /is a Set/],
    ['a WeakMap', { w: new WeakMap() }, 'payload.w', /WeakMap/],
    ['a Promise', { p: Promise.resolve(1) }, 'payload.p', /is a Promise/],
    ['NaN', { items: [0, 1, 2, { price: NaN }] }, 'payload.items[3].price', /is NaN, which JSON stores as null/],
    ['Infinity', { x: Infinity }, 'payload.x', /is Infinity/],
    ['-Infinity at the root', -Infinity, 'payload', /is -Infinity/],
    ['a hole in an array', { a: sparse }, 'payload.a[1]', /hole in a sparse array/],
    ['undefined in an array', [1, undefined], 'payload[1]', /undefined inside an array/],
    ['a BigInt', { id: 10n }, 'payload.id', /is a BigInt/],
    ['a cycle', cyclic, 'payload.a.b[1]', /refers back to payload: a cycle/],
    ['a RegExp', { r: /x/ }, 'payload.r', /is a RegExp/],
    ['an Error', { e: new Error('boom') }, 'payload.e', /is an Error, which JSON stores without its message/],
    ['a typed array', { t: new Uint8Array([1, 2]) }, 'payload.t', /is a Uint8Array/],
    ['a Buffer (whose toJSON would give { type, data })', { b: Buffer.from('hi') }, 'payload.b', /is a Buffer/],
    ['an ArrayBuffer', { b: new ArrayBuffer(2) }, 'payload.b', /is an ArrayBuffer/],
    ['a boxed string', { s: new String('x') }, 'payload.s', /boxed String/],
    ['a boxed number', [new Number(1)], 'payload[0]', /boxed Number/],
    ['an invalid Date', { at: new Date('nope') }, 'payload.at', /invalid Date/],
    ['a getter that throws', { o: throwingGetter }, 'payload.o.bad', /getter threw "not loaded"/],
    ['a toJSON that throws', { x: badToJson }, 'payload.x', /toJSON\(\) threw "nope"/],
    ['a NUL character', { s: 'a\u0000b' }, 'payload.s', /NUL character \(\\u0000\) at index 1/],
    ['a lone surrogate', { text: 'half of 😀'.slice(0, -1) }, 'payload.text', /lone UTF-16 surrogate \(\\ud83d\) at index 8/],
    ['a NUL in a property name', nulKey, 'payload["a\\u0000b"]', /property name that contains a NUL/],
    ['an odd property name on the path', { 'my key': [NaN] }, 'payload["my key"][0]', /is NaN/],
  ])('refuses %s, naming where it is', (_what, value, path, problem) => {
    const err = refusal(value);
    expect(err.path).toBe(path);
    expect(err.message).toMatch(problem);
    expect(err.message.startsWith(`${path} `)).toBe(true);
  });

  it('names the root it is given (a handler result)', () => {
    expect(refusal({ total: NaN }, 'result').path).toBe('result.total');
  });

  it('quotes a long property name briefly on the path', () => {
    const err = refusal({ ['k '.repeat(5000)]: NaN });
    expect(err.path.length).toBeLessThan(120);
    expect(err.path).toContain('(10000 characters)');
  });

  /** `levels` arrays and objects, alternating, around 1: `[{ "k": [{ ... }] }]`. */
  const nested = (levels: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < levels; i++) v = i % 2 ? { k: v } : [v];
    return v;
  };

  it(`writes ${MAX_JSON_DEPTH} levels of nesting as JSON.stringify does`, () => {
    const v = nested(MAX_JSON_DEPTH);
    expect(toJsonText(v, 'payload')).toBe(JSON.stringify(v));
  });

  // Issue 24, point 6: a recursive walk overflowed the stack at a depth that changed with the JIT
  // (3,000 refused in one run, 4,000 accepted in the next), quoting a path of 4,700-10,000 characters.
  it.each([MAX_JSON_DEPTH + 1, 4_000, 100_000, 1_000_000])(
    'refuses %i levels at the same level, with a short message, never overflowing the stack',
    (levels) => {
      const err = refusal(nested(levels));
      expect(err.message).toMatch(new RegExp(`is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`));
      expect(err.cause).toBeUndefined(); // not a RangeError caught on the way out
      expect(err.message.length).toBeLessThan(400);
      // The path is cut in its middle: where it starts, and the level refused.
      expect(err.path).toMatch(/^payload(\[0\])?\.k\[0\]\.k.*….*\.k(\[0\])? \(\d+ characters\)$/);
      expect(err.path.length).toBeLessThan(160);
    },
  );

  it('refuses the same depth every time, whatever V8 has compiled', () => {
    const paths = new Set<string>();
    for (let i = 0; i < 50; i++) paths.add(refusal(nested(MAX_JSON_DEPTH + 1 + 2 * (i % 2))).path);
    expect(paths.size).toBe(1); // refused at level MAX_JSON_DEPTH + 1 (same shape outside)
  });

  it.each<[string, unknown]>([
    ['plain data', { a: 1, b: 'two', c: [true, false, null], d: { e: -0.5e3 } }],
    ['escapes, whole emoji and the text "\\u0000"', { s: 'quote " backslash \\ tab \t 😀 \\u0000 \\ud83d' }],
    ['a null-prototype object', Object.assign(Object.create(null) as object, { a: 1 })],
    ['a class instance (its own enumerable fields)', new Dto()],
    ['a toJSON (called once, its result checked)', { price: new Money(5, 'EUR') }],
    ['a Date (its ISO string)', { at: new Date(Date.UTC(2026, 0, 1)) }],
    ['undefined properties (left out)', { a: undefined, b: 1 }],
    ['-0 (stored as 0)', { z: -0 }],
    ['a symbol-keyed property (metadata, left out as JSON does)', { deep: symbolKeyed }],
    ['an empty array and object', [[], {}]],
    ['a string at the root', 'just a string'],
    ['null', null],
    [
      'the same object twice (not a cycle)',
      (() => {
        const o = { x: 1 };
        return { a: o, b: [o, o] };
      })(),
    ],
  ])('writes %s exactly as JSON.stringify does', (_what, value) => {
    expect(toJsonText(value, 'payload')).toBe(JSON.stringify(value));
  });

  it('writes undefined at the root as null', () => {
    expect(toJsonText(undefined, 'result')).toBe('null');
  });

  it('reads a getter once: what was checked is what is stored', () => {
    let reads = 0;
    const o = {
      get n() {
        reads++;
        return reads === 1 ? 1 : NaN;
      },
    };
    expect(toJsonText(o, 'payload')).toBe('{"n":1}');
    expect(reads).toBe(1);
  });
});

describe('toStorableJson: error texts are stored, what jsonb refuses replaced by U+FFFD', () => {
  const json = (s: string) => JSON.stringify({ s });

  it.each([
    ['plain text', 'hello', false],
    ['a whole emoji', '😀', false],
    ['a NUL character', 'a\u0000b', true],
    ['a lone high surrogate', '😀'.slice(0, 1), true],
    ['a lone low surrogate', '😀'.slice(1), true],
    ['the text \\u0000 (a backslash, not a NUL)', '\\u0000', false],
    ['a backslash, then a lone surrogate', '\\' + '😀'.slice(0, 1), true],
  ])('%s', (_what, text, replaced) => {
    const fixed = JSON.parse(toStorableJson(json(text))).s as string;
    if (replaced) expect(fixed).toMatch(/\ufffd/);
    else expect(fixed).toBe(text);
  });

  it('keeps the backslash that precedes a replaced escape', () => {
    expect(JSON.parse(toStorableJson(json('\\' + '😀'.slice(0, 1) + 'x'))).s).toBe('\\\ufffdx');
  });
});
