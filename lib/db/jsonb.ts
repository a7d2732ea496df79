/**
 * What PostgreSQL's jsonb refuses in JSON text that `JSON.stringify` accepts: the escape
 * \u0000, and a UTF-16 surrogate without its other half (a string cut in the middle of an emoji,
 * say). `JSON.stringify` writes a lone surrogate as a \udXXX escape and a whole pair as the
 * character itself, so in its output every surrogate escape is a lone one. The lookbehind skips
 * an escaped backslash followed by the text "u0000" or "ud800".
 */
const UNSTORABLE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi;
const UNSTORABLE_ONE = new RegExp(UNSTORABLE.source, 'i');
const LONE_SURROGATE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/i;

/** True when `json` (output of `JSON.stringify`) holds a lone surrogate, which jsonb refuses. */
export function hasLoneSurrogate(json: string): boolean {
  // The cheap test first: this runs on every enqueued payload.
  return json.includes('\\ud') && LONE_SURROGATE.test(json);
}

/** True when jsonb accepts `json` (output of `JSON.stringify`). */
export function isStorableJson(json: string): boolean {
  return !json.includes('\\u') || !UNSTORABLE_ONE.test(json);
}

/** `json` with what jsonb refuses replaced by U+FFFD, the replacement character. */
export function toStorableJson(json: string): string {
  return json.includes('\\u') ? json.replace(UNSTORABLE, '$1\\ufffd') : json;
}
