import { types } from 'node:util';
import { quote, shortenMiddle, textProblem } from '../core/input-text';

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

/**
 * The deepest nesting of arrays and objects a payload, a result or a progress value may have:
 * `{ "a": [1] }` is 2 levels. Real payloads stay under 20; serde_json stops at 128, Ruby's JSON at
 * 100. PostgreSQL parses and prints jsonb recursively within `max_stack_depth`: on PostgreSQL 15
 * it accepted 12,001 levels and refused 16,001 at the default 2MB, and 601 / refused 701 at the
 * smallest setting, 100kB (measured: `SELECT ...::jsonb` of alternating objects and arrays, inside
 * the bulk insert's outer array). 256 is within every setting, with room to spare.
 */
export const MAX_JSON_DEPTH = 256;

/**
 * Serialises `value` as the JSON text jsonb stores, refusing (with {@link UnstorableJsonError})
 * every value JSON would store as something other than what was passed. One walk both checks and
 * writes, so a getter or `toJSON` runs once and what was checked is what is stored.
 *
 * The walk keeps its own stack (no recursion), so how deep a value may be is
 * {@link MAX_JSON_DEPTH} levels, every time: the recursive walk it replaced overflowed the JS
 * stack at a depth that changed with what V8 had compiled (3,000 levels refused in one run, 4,000
 * accepted in the next). That costs some speed: on 100,000 small payloads (five fields, one of
 * them an array, one an object) it took 1.7 times `JSON.stringify` alone, the recursive walk 1.5
 * (medians of 7 rounds, about 4 us a payload against 3.5; shared 2-core machine).
 *
 * Refused, at any depth: functions and symbols (JSON drops them), BigInt, NaN and ±Infinity (stored as null), `undefined` and holes in arrays (null), cycles,
 * Map, Set, WeakMap, WeakSet, Promise, RegExp and Error (stored as `{}` or without their message),
 * typed arrays, Buffer, ArrayBuffer and DataView (numbered keys), boxed primitives
 * (`new String('x')`, stored as the primitive), an invalid Date (null), a getter or `toJSON`
 * that throws, any string or property name PostgreSQL cannot store (a NUL, a lone UTF-16
 * surrogate), and nesting deeper than {@link MAX_JSON_DEPTH}.
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
    return w.write(value);
  } catch (err) {
    if (err instanceof UnstorableJsonError) throw err;
    // Something thrown by a Proxy's trap, or a RangeError: a text longer than V8's longest string.
    throw new UnstorableJsonError(
      w.path(null),
      err instanceof RangeError
        ? `cannot be written as JSON text: ${quote(err.message)}`
        : `cannot be read: ${quote(String(err))}`,
      { cause: err },
    );
  } finally {
    w.reset();
    spare = w;
  }
}

let spare: JsonWriter | null = null;

/** An array or object being written: the walk's own stack holds one per level. */
interface Frame {
  value: object | null;
  /** The key it sits under in its parent ('' for the root). */
  key: string | number;
  /** Its own enumerable property names; null for an array. */
  names: string[] | null;
  /** The next index (array) or name (object) to write. */
  i: number;
  /** Its JSON text so far. */
  out: string;
}

class JsonWriter {
  /**
   * The stack: `frames[0 .. depth - 1]` are the arrays and objects being written, outermost
   * first. Frames are reused across levels and writes (a new one per level cost a fifth of the
   * walk on small payloads).
   */
  private readonly frames: Frame[] = [];
  private depth = 0;
  root = '';

  reset(): void {
    // Drops what a write that threw left on the stack, so the writer holds no payload.
    while (this.depth > 0) this.pop();
  }

  write(value: unknown): string {
    const top = this.resolve(value, '', true);
    if (typeof top === 'string') return top;
    let f = this.open(top, '');
    for (;;) {
      let key: string | number;
      let e: unknown;
      let head: string; // what precedes the child: a comma, and in an object its name
      const names = f.names;
      if (names === null) {
        const a = f.value as unknown[];
        if (f.i === a.length) {
          const text = this.pop() + ']';
          if (this.depth === 0) return text;
          f = this.frames[this.depth - 1];
          f.out += text;
          continue;
        }
        key = f.i++;
        e = a[key];
        if (e === undefined && !(key in a))
          this.refuse(key, 'is a hole in a sparse array, which JSON stores as null. Fill it, or use null');
        head = key === 0 ? '' : ',';
      } else {
        if (f.i === names.length) {
          const text = this.pop() + '}';
          if (this.depth === 0) return text;
          f = this.frames[this.depth - 1];
          f.out += text;
          continue;
        }
        key = names[f.i++];
        e = this.read(f.value!, key);
        if (e === undefined) continue;
        // '{' alone: nothing written yet.
        head = (f.out.length === 1 ? '' : ',') + this.string(key, key, true) + ':';
      }
      const r = this.resolve(e, key, true);
      if (typeof r === 'string') {
        f.out += head + r;
      } else {
        f.out += head;
        f = this.open(r, key);
      }
    }
  }

  /** Starts writing array or object `v` one level deeper, or refuses it past MAX_JSON_DEPTH. */
  private open(v: object, key: string | number): Frame {
    if (this.depth === MAX_JSON_DEPTH) {
      this.refuse(
        key,
        `is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects, the most a job's JSON may have ` +
          "(PostgreSQL's jsonb is parsed recursively, within its max_stack_depth). Flatten it, or store it elsewhere and pass its id",
      );
    }
    const isArray = Array.isArray(v);
    let f = this.frames[this.depth];
    if (f === undefined) {
      f = { value: null, key: '', names: null, i: 0, out: '' };
      this.frames.push(f);
    }
    f.value = v;
    f.key = key;
    f.names = isArray ? null : Object.keys(v);
    f.i = 0;
    f.out = isArray ? '[' : '{';
    this.depth++;
    return f;
  }

  /** Ends the innermost array or object: returns its text so far, and lets go of it. */
  private pop(): string {
    const f = this.frames[--this.depth];
    const out = f.out;
    f.value = null;
    f.names = null;
    f.out = '';
    return out;
  }

  /**
   * `v` as JSON text when it is a scalar, or the array or object to write in its place (after its
   * `toJSON`, checked not to be a cycle). Recurses at most once, into what a `toJSON` returned.
   */
  private resolve(v: unknown, key: string | number, mayCallToJson: boolean): string | object {
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
          return this.resolve(this.call(toJson as (k: string) => unknown, v, key), key, false);
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

  private object(v: object, key: string | number, mayCallToJson: boolean): string | object {
    const proto = Object.getPrototypeOf(v) as unknown;
    if (proto !== Object.prototype && proto !== null && !Array.isArray(v)) {
      const builtin = refusedBuiltin(v);
      if (builtin) return this.refuse(key, builtin);
    }
    if (mayCallToJson) {
      const toJson = (v as { toJSON?: unknown }).toJSON;
      if (typeof toJson === 'function') return this.resolve(this.call(toJson as (k: string) => unknown, v, key), key, false);
    }
    for (let i = 0; i < this.depth; i++) {
      if (this.frames[i].value === v) {
        return this.refuse(key, `refers back to ${this.path(i)}: a cycle, which JSON cannot store. Pass a tree`);
      }
    }
    return v;
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

  /**
   * `payload.items[3].price`: the path of `frames[upTo]` (null: of the current value, then `key`),
   * cut in its middle past {@link PATH_MAX} characters (a path 256 levels deep is ~800).
   */
  path(upTo: number | null, key: string | number | null = null): string {
    const end = upTo === null ? this.depth : upTo + 1;
    let p = this.root;
    for (let i = 1; i < end; i++) p += segment(this.frames[i].key);
    if (upTo === null && key !== null && !(this.depth === 0 && key === '')) p += segment(key);
    return shortenMiddle(p, PATH_MAX);
  }
}

/** The longest path a message shows in full. */
const PATH_MAX = 120;

function segment(s: string | number): string {
  return typeof s === 'number' ? `[${s}]` : IDENTIFIER.test(s) ? `.${s}` : `[${quote(s)}]`;
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
