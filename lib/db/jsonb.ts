import { types } from 'node:util';
import { quote, textProblem } from '../core/input-text';

/**
 * A value `toJsonText` refuses: where it is (`payload.items[3].price`) and what is wrong with it.
 * Callers wrap it in the error their caller sees (`PgQueuePayloadError`).
 */
export class UnstorableJsonError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`${path} ${problem}`, options);
    this.name = 'UnstorableJsonError';
  }
}

/** A string JSON writes as it is, between quotes; anything else goes through JSON.stringify. */
// eslint-disable-next-line no-control-regex -- the control characters JSON must escape
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const hasOwn = Object.prototype.hasOwnProperty;

/**
 * Serialises `value` as the JSON text jsonb stores, refusing (with {@link UnstorableJsonError})
 * every value JSON would store as something other than what was passed. One walk both checks and
 * writes, so a getter or `toJSON` runs once and what was checked is what is stored; on small
 * payloads it costs about 1.5 times `JSON.stringify` alone: some 15 ms more per 100,000 small
 * payloads, 2 % of a bulk enqueue of them.
 *
 * Refused, at any depth: functions and symbols (JSON drops them), BigInt, NaN and ±Infinity (stored as null), `undefined` and holes in arrays (null), cycles,
 * Map, Set, WeakMap, WeakSet, Promise, RegExp and Error (stored as `{}` or without their message),
 * typed arrays, Buffer, ArrayBuffer and DataView (numbered keys), boxed primitives
 * (`new String('x')`, stored as the primitive), an invalid Date (null), a getter or `toJSON`
 * that throws, and any string or property name PostgreSQL cannot store (a NUL, a lone UTF-16
 * surrogate).
 *
 * Kept, as JSON does and as documented: a Date becomes its ISO string; a property whose value
 * is `undefined` is left out; an object with `toJSON()` (a class instance, a Luxon DateTime) is
 * stored as what that returns, checked the same way; any other object, class instance or not,
 * as its own enumerable string-keyed properties; -0 as 0. Left out as JSON leaves them out, not
 * refused: symbol-keyed properties (the language's way to attach metadata that is not data;
 * checking for them also cost a fifth of the walk, in Object.getOwnPropertySymbols), and
 * properties of an array that are not indices.
 *
 * @param root the name of the value in messages: `payload` or `result`. `undefined` at the root is `null`.
 */
export function toJsonText(value: unknown, root: string): string {
  if (value === undefined) return 'null';
  // One writer is reused (a new one per payload was a tenth of the walk's cost); a toJSON that
  // enqueues (re-entering here) gets a fresh one.
  const w = spare ?? new JsonWriter();
  spare = null;
  w.root = root;
  try {
    return w.write(value, '', true);
  } catch (err) {
    if (err instanceof UnstorableJsonError) throw err;
    // A stack overflow (a value nested thousands deep), or something thrown by a Proxy's trap.
    throw new UnstorableJsonError(
      w.path(null),
      err instanceof RangeError ? 'is nested too deeply to store' : `cannot be read: ${quote(String(err))}`,
      { cause: err },
    );
  } finally {
    w.reset();
    spare = w;
  }
}

let spare: JsonWriter | null = null;

class JsonWriter {
  /** The objects and arrays being written, outermost first, and the key each sits under. */
  private readonly parents: object[] = [];
  private readonly keys: (string | number)[] = [];
  root = '';

  reset(): void {
    // Empty already unless a write threw: setting length on every call cost a tenth of the walk.
    if (this.parents.length) this.parents.length = 0;
    if (this.keys.length) this.keys.length = 0;
  }

  write(v: unknown, key: string | number, mayCallToJson: boolean): string {
    switch (typeof v) {
      case 'string':
        return this.string(v, key);
      case 'number':
        if (Number.isFinite(v)) return '' + v;
        return this.refuse(key, `is ${v}, which JSON stores as null. Pass a finite number, or null`);
      case 'boolean':
        return v ? 'true' : 'false';
      case 'object':
        if (v === null) return 'null';
        return this.object(v, key, mayCallToJson);
      case 'bigint': {
        // JSON.stringify honours a BigInt.prototype.toJSON an app installed (to write strings): so do we.
        const toJson = (BigInt.prototype as { toJSON?: unknown }).toJSON;
        if (mayCallToJson && typeof toJson === 'function')
          return this.write(this.call(toJson as (k: string) => unknown, v, key), key, false);
        return this.refuse(key, 'is a BigInt, which JSON cannot store. Convert it to a string (or a number, if it fits)');
      }
      case 'function':
        return this.refuse(key, 'is a function, which JSON leaves out. Remove it; pass data only');
      case 'symbol':
        return this.refuse(key, 'is a symbol, which JSON leaves out. Remove it, or pass its description as a string');
      default:
        return typeof key === 'number'
          ? this.refuse(key, 'is undefined inside an array, which JSON stores as null. Use null')
          : this.refuse(key, 'is undefined, returned by its toJSON(), which JSON leaves out. Return a value, or null');
    }
  }

  private string(s: string, key: string | number, isKey = false): string {
    if (!NEEDS_ESCAPE.test(s)) return '"' + s + '"';
    const problem = textProblem(s);
    if (problem) this.refuse(key, isKey ? `has a property name that ${problem}` : problem);
    return JSON.stringify(s);
  }

  private object(v: object, key: string | number, mayCallToJson: boolean): string {
    const proto = Object.getPrototypeOf(v) as unknown;
    if (proto !== Object.prototype && proto !== null && !Array.isArray(v)) {
      const builtin = refusedBuiltin(v);
      if (builtin) return this.refuse(key, builtin);
    }
    if (mayCallToJson) {
      const toJson = (v as { toJSON?: unknown }).toJSON;
      if (typeof toJson === 'function') return this.write(this.call(toJson as (k: string) => unknown, v, key), key, false);
    }
    if (this.parents.includes(v)) {
      return this.refuse(
        key,
        `refers back to ${this.path(this.parents.indexOf(v))}: a cycle, which JSON cannot store. Pass a tree`,
      );
    }
    this.parents.push(v);
    this.keys.push(key);
    let out: string;
    if (Array.isArray(v)) {
      out = '[';
      for (let i = 0; i < v.length; i++) {
        const e = v[i] as unknown;
        if (e === undefined && !(i in v))
          this.refuse(i, 'is a hole in a sparse array, which JSON stores as null. Fill it, or use null');
        out += (i === 0 ? '' : ',') + this.write(e, i, true);
      }
      out += ']';
    } else {
      out = '{';
      let first = true;
      for (const k in v) {
        if (!hasOwn.call(v, k)) continue;
        const e = this.read(v, k);
        if (e === undefined) continue;
        out += (first ? '' : ',') + this.string(k, k, true) + ':' + this.write(e, k, true);
        first = false;
      }
      out += '}';
    }
    this.parents.pop();
    this.keys.pop();
    return out;
  }

  private read(o: object, k: string): unknown {
    try {
      return (o as Record<string, unknown>)[k];
    } catch (err) {
      return this.refuse(k, `cannot be read: its getter threw ${quote(err instanceof Error ? err.message : err)}`, err);
    }
  }

  private call(fn: (this: unknown, key: string) => unknown, self: unknown, key: string | number): unknown {
    try {
      return fn.call(self, typeof key === 'number' ? String(key) : key);
    } catch (err) {
      return this.refuse(key, `cannot be stored: its toJSON() threw ${quote(err instanceof Error ? err.message : err)}`, err);
    }
  }

  private refuse(key: string | number | null, problem: string, cause?: unknown): never {
    throw new UnstorableJsonError(this.path(null, key), problem, cause === undefined ? undefined : { cause });
  }

  /** `payload.items[3].price`: the path of `parents[upTo]` (null: of the current value, then `key`). */
  path(upTo: number | null, key: string | number | null = null): string {
    const segments = upTo === null ? this.keys.slice(1) : this.keys.slice(1, upTo + 1);
    if (upTo === null && key !== null && !(this.keys.length === 0 && key === '')) segments.push(key);
    let p = this.root;
    for (const s of segments) p += typeof s === 'number' ? `[${s}]` : IDENTIFIER.test(s) ? `.${s}` : `[${quote(s)}]`;
    return p;
  }
}

/** Why JSON cannot carry `v`, a non-plain object, faithfully; null when it can (a class instance, a Date). */
function refusedBuiltin(v: object): string | null {
  if (types.isDate(v))
    return Number.isNaN((v as Date).getTime()) ? 'is an invalid Date, which JSON stores as null. Pass a valid Date' : null;
  if (types.isMap(v))
    return 'is a Map, which JSON stores as {}. Convert it: Object.fromEntries(map), or [...map] for non-string keys';
  if (types.isSet(v)) return 'is a Set, which JSON stores as {}. Convert it to an array: [...set]';
  if (types.isWeakMap(v) || types.isWeakSet(v)) return 'is a WeakMap or WeakSet, which JSON stores as {}. Pass data';
  if (types.isPromise(v)) return 'is a Promise, which JSON stores as {}. Await it and pass its value';
  if (types.isRegExp(v)) return 'is a RegExp, which JSON stores as {}. Pass its source as a string';
  if (types.isNativeError(v) || v instanceof Error) {
    return 'is an Error, which JSON stores without its message or stack. Pass { name, message } (and what else you need) instead';
  }
  if (types.isAnyArrayBuffer(v) || ArrayBuffer.isView(v)) {
    const type = Buffer.isBuffer(v) ? 'Buffer' : Object.prototype.toString.call(v).slice(8, -1);
    const kind = `${/^[AEIO]/.test(type) ? 'an' : 'a'} ${type}`;
    return `is ${kind}, which JSON stores as an object of numbers. Encode it, for example as a base64 string`;
  }
  if (types.isBoxedPrimitive(v)) {
    return `is a boxed ${Object.prototype.toString.call(v).slice(8, -1)} (new String(), new Number()...), which JSON stores as a primitive. Pass the primitive: value.valueOf()`;
  }
  return null;
}

/**
 * What PostgreSQL's jsonb refuses in JSON text that `JSON.stringify` accepts: the escape
 * \u0000, and a UTF-16 surrogate without its other half (a string cut in the middle of an emoji,
 * say). `JSON.stringify` writes a lone surrogate as a \udXXX escape and a whole pair as the
 * character itself, so in its output every surrogate escape is a lone one. The lookbehind skips
 * an escaped backslash followed by the text "u0000" or "ud800".
 */
const UNSTORABLE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi;

/**
 * `json` (output of `JSON.stringify`) with what jsonb refuses replaced by U+FFFD, the replacement
 * character: for error texts, which must be stored even when a handler's message holds a NUL.
 */
export function toStorableJson(json: string): string {
  return json.includes('\\u') ? json.replace(UNSTORABLE, '$1\\ufffd') : json;
}
