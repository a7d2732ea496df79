/**
 * How error messages show what the caller passed, and what PostgreSQL cannot store in text.
 * Internal: not exported from the barrel.
 */

/** Longest stretch of a caller's value an error message quotes; the rest is counted, not shown. */
const QUOTE_MAX = 60;

/**
 * `value` as an error message shows it: short, printable and never throwing. A string is quoted
 * as JSON (a NUL shows as `\u0000`, half a surrogate pair as `\ud83d`) and cut after
 * {@link QUOTE_MAX} characters with its length said; anything else is described by its type, or
 * printed as short JSON.
 * @example quote('x'.repeat(10_000)) // '"xxxx…xxx"… (10000 characters)'
 */
export function quote(value: unknown, max = QUOTE_MAX): string {
  try {
    switch (typeof value) {
      case 'string':
        return value.length <= max
          ? JSON.stringify(value)
          : `${JSON.stringify(value.slice(0, max))}… (${value.length} characters)`;
      case 'number':
        return Object.is(value, -0) ? '-0' : String(value);
      case 'bigint':
        return shorten(`${value}n`, max);
      case 'symbol':
        return shorten(value.toString(), max);
      case 'function':
        return value.name ? `a function (${shorten(value.name, max)})` : 'a function';
      case 'undefined':
      case 'boolean':
        return String(value);
      default: {
        if (value === null) return 'null';
        if (Array.isArray(value)) return `an array of ${value.length}`;
        if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'an invalid Date' : `Date ${value.toISOString()}`;
        const json = JSON.stringify(value);
        return json === undefined ? Object.prototype.toString.call(value) : shorten(json, max);
      }
    }
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** `s` unquoted, cut after `max` characters with its length said: for text already known printable. */
export function shorten(s: string, max = QUOTE_MAX): string {
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length} characters)`;
}

/**
 * `s` cut in its middle to about `max` characters, with its length said: for a path, whose start
 * says where it is and whose end names the value. Never cuts a surrogate pair in two.
 * @example shortenMiddle('payload' + '[0]'.repeat(300), 40) // 'payload[0][0][0][0][…0][0][0][0][0][0][0] (907 characters)'
 */
export function shortenMiddle(s: string, max = 2 * QUOTE_MAX): string {
  if (s.length <= max) return s;
  let head = Math.floor(max / 2);
  let tail = s.length - (max - head);
  if (isLowSurrogate(s.charCodeAt(head))) head--;
  if (isLowSurrogate(s.charCodeAt(tail))) tail++;
  return `${s.slice(0, head)}…${s.slice(tail)} (${s.length} characters)`;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Cheap first test, true for any NUL or surrogate (whole pairs too): the exact one runs only then. */
// NUL is what these look for: PostgreSQL cannot store it.
/* eslint-disable no-control-regex */
const MAY_BE_UNSTORABLE = /[\u0000\ud800-\udfff]/;
const NUL_OR_LONE_SURROGATE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/* eslint-enable no-control-regex */

/**
 * What PostgreSQL cannot store of `s` as given, said for an error message, or null when it can.
 * A NUL is refused by text and jsonb alike; a lone UTF-16 surrogate (half of an emoji, from a
 * string cut with slice or substring) is refused by jsonb and silently turned into U+FFFD in a
 * text column, so two different strings would compare equal once stored.
 */
export function textProblem(s: string): string | null {
  if (!MAY_BE_UNSTORABLE.test(s)) return null;
  const m = NUL_OR_LONE_SURROGATE.exec(s);
  if (!m) return null;
  return m[0] === '\u0000'
    ? `contains a NUL character (\\u0000) at index ${m.index}, which PostgreSQL cannot store: remove or encode it`
    : `contains a lone UTF-16 surrogate (\\u${m[0].charCodeAt(0).toString(16)}) at index ${m.index}: half of a character, ` +
        `usually from cutting a string with slice or substring, which PostgreSQL cannot store as given. Cut strings between ` +
        `characters, or pass them through String.prototype.toWellFormed()`;
}

/** Shorthand for the checks every stored name shares: a string, 1 to `max` characters, storable. */
export function nameProblem(value: unknown, max: number): string | null {
  if (typeof value !== 'string') return `expected a string, got ${value === null ? 'null' : typeof value}`;
  if (value.length === 0) return 'it is empty';
  const text = textProblem(value);
  if (text) return `it ${text}`;
  if (value.length > max) return `it is ${value.length} characters long, over the limit of ${max}`;
  return null;
}
