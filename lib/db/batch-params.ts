/**
 * Parameters of the batch outcome statements (queries.ts, completeArchive and completeDelete),
 * built by hand where pg's generic encoding costs the worker per job.
 */

/**
 * Job ids as the text of a bigint[] literal. pg encodes a JS array element by element, with two
 * regular-expression replaces per string (its escapeElement): about 4 % of a no-op drain's worker
 * time (node --cpu-prof, bench/). Ids are the decimal text of bigints (from the claim), which
 * need no quoting; anything else is refused by the database as a bigint, never read as SQL.
 */
export function bigintArrayText(ids: readonly string[]): string {
  return `{${ids.join(',')}}`;
}

/**
 * The attempts of a batch, in id order: one element when every job of the batch is on the same
 * attempt (nearly always: first attempts), which the statement then compares with each row
 * directly instead of looking up the row's position in the id array (a scan of the array per
 * row, n^2/2 comparisons per batch).
 */
export function attemptsParam(attempts: readonly number[]): number[] {
  const first = attempts[0];
  for (let i = 1; i < attempts.length; i++) if (attempts[i] !== first) return attempts.slice();
  return attempts.length ? [first] : [];
}

/**
 * The results of a batch of completions as the text of one JSON object keyed by job id, for
 * `$3::jsonb -> id` (a binary search per row); jobs whose result is NULL are left out. NULL when
 * no job of the batch has a result (most handlers return nothing). Each result is already JSON
 * text (the worker's `resultJson`), so the object is spliced from them, never re-serialised.
 */
export function resultsByIdJson(outcomes: readonly { readonly id: string; readonly resultJson: string | null }[]): string | null {
  let out: string | null = null;
  for (const o of outcomes) {
    if (o.resultJson === null) continue;
    out = `${out === null ? '{' : `${out},`}"${o.id}":${o.resultJson}`;
  }
  return out === null ? null : `${out}}`;
}
