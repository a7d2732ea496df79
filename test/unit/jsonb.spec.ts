import { hasLoneSurrogate, isStorableJson, toStorableJson } from '../../lib/db/jsonb';

// What PostgreSQL's jsonb refuses in JSON.stringify output: \u0000 and lone surrogates. The
// integration suites show the database refusing them; this pins down the text matching.
describe('JSON text jsonb can store', () => {
  const json = (s: string) => JSON.stringify({ s });

  it.each([
    ['plain text', 'hello', true, false],
    ['a whole emoji', '😀', true, false],
    ['a control character', 'a\u0001b', true, false],
    ['a NUL character', 'a\u0000b', false, false],
    ['a lone high surrogate (an emoji cut in half)', '😀'.slice(0, 1), false, true],
    ['a lone low surrogate', '😀'.slice(1), false, true],
    ['two halves in the wrong order', '\udc00\ud800', false, true],
    ['the text \\u0000 (a backslash, not a NUL)', '\\u0000', true, false],
    ['the text \\ud83d (a backslash, not a surrogate)', '\\ud83d', true, false],
    ['a backslash, then a lone surrogate', '\\' + '😀'.slice(0, 1), false, true],
  ])('%s', (_what, text, storable, lone) => {
    expect(isStorableJson(json(text))).toBe(storable);
    expect(hasLoneSurrogate(json(text))).toBe(lone);
    const fixed = toStorableJson(json(text));
    expect(isStorableJson(fixed)).toBe(true);
    if (storable) expect(fixed).toBe(json(text));
    else expect(JSON.parse(fixed).s).toMatch(/\ufffd/);
  });

  it('keeps the backslash that precedes a replaced escape', () => {
    expect(JSON.parse(toStorableJson(json('\\' + '😀'.slice(0, 1) + 'x'))).s).toBe('\\\ufffdx');
  });
});
