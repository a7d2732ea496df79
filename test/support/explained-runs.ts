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
  // Two plain reads, joined here: one statement with a correlated subquery per row planned past
  // jit_above_cost over 10,000 jobs, and the Testcontainers image (this machine's PostgreSQL files)
  // has no LLVM for JIT to load.
  const history = await db.query(
    `SELECT id::text AS id, attempt, state, errors FROM ${schema}.job_history
     WHERE $1::bigint[] IS NULL OR id = ANY($1::bigint[])`,
    [ids ?? null],
  );
  const runsOf = new Map<string, number[]>();
  for (const r of (await db.query('SELECT job_id::text AS job_id, attempt FROM runs ORDER BY attempt')).rows as {
    job_id: string;
    attempt: number;
  }[]) {
    runsOf.set(r.job_id, [...(runsOf.get(r.job_id) ?? []), r.attempt]);
  }
  const rows = (history.rows as { id: string; attempt: number; state: string; errors: { attempt?: number }[] | null }[]).map(
    (h) => ({
      id: h.id,
      attempt: h.attempt,
      state: h.state,
      runs: runsOf.get(h.id) ?? [],
      errored: (h.errors ?? []).map((e) => Number(e.attempt)),
    }),
  );
  const out: string[] = [];
  for (const r of rows) {
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
