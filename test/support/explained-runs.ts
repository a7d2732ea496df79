/** What the helper needs of a pg Pool or Client. */
interface Queryable {
  query(text: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/**
 * The at-least-once guarantee as a test can check it whatever the machine's speed: every
 * finished job ran (a row in the test's `runs` table, with `job_id` and `attempt`), each attempt
 * at most once, and every run before the job's last attempt ended with an error recorded for
 * that attempt (a `LeaseExpiredError` after a crash or a lease a stalled process let lapse, or
 * the handler's own failure). A second run no recorded error explains (two processes claiming one
 * job, an outcome written twice) is what this returns, one line per job; `[]` when every run is
 * explained. `ids` limits it to those jobs (all of the history's otherwise).
 *
 * Exact run counts ("each job ran once") hold only while no lease runs out: on a loaded 2-core
 * machine a heartbeat can come seconds late, and the rescue that follows is a second run the
 * library allows (docs/reliability.md, "Where a job can run twice"), not a bug.
 */
export async function unexplainedRuns(db: Queryable, ids?: readonly string[], schema = 'pgqueue'): Promise<string[]> {
  const { rows } = await db.query(
    `SELECT h.id::text AS id, h.attempt, h.state,
            coalesce((SELECT array_agg(r.attempt ORDER BY r.attempt) FROM runs r WHERE r.job_id = h.id), '{}') AS runs,
            (SELECT coalesce(array_agg((e->>'attempt')::int), '{}') FROM jsonb_array_elements(h.errors) e) AS errored
     FROM ${schema}.job_history h WHERE $1::bigint[] IS NULL OR h.id = ANY($1::bigint[])`,
    [ids ?? null],
  );
  const out: string[] = [];
  for (const r of rows as { id: string; attempt: number; state: string; runs: number[]; errored: number[] }[]) {
    const problems: string[] = [];
    if (r.state === 'completed' && !r.runs.includes(r.attempt)) problems.push(`no run of its last attempt ${r.attempt}`);
    if (new Set(r.runs).size !== r.runs.length) problems.push('an attempt ran twice');
    const unexplained = r.runs.filter((a) => a !== r.attempt && !r.errored.includes(a));
    if (unexplained.length) problems.push(`attempt(s) ${unexplained.join(', ')} ran and recorded no error`);
    if (problems.length) out.push(`job ${r.id} (${r.state}, attempt ${r.attempt}, runs [${r.runs}]): ${problems.join('; ')}`);
  }
  if (ids && rows.length !== ids.length) out.push(`${ids.length - rows.length} of ${ids.length} jobs are not finished`);
  return out;
}
