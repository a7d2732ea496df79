/**
 * Parameters of the batch outcome statements (outcomes.ts, completeArchive and completeDelete),
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
 * The attempts of a batch: `attempt` when every job of the batch is on the same one (nearly
 * always: first attempts), which the statement compares with each row directly; otherwise
 * `byId`, the text of a JSON object of each id's attempt, a binary search per row. Either way no
 * row's attempt is looked up by its position in an array (a scan of the array per row, n^2/2
 * comparisons per batch).
 */
export function attemptParams(outcomes: readonly { readonly id: string; readonly attempt: number }[]): {
  attempt: number | null;
  byId: string | null;
} {
  const first = outcomes[0]?.attempt;
  if (outcomes.every((o) => o.attempt === first)) return { attempt: first ?? null, byId: null };
  return { attempt: null, byId: `{${outcomes.map((o) => `"${o.id}":${o.attempt}`).join(',')}}` };
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
