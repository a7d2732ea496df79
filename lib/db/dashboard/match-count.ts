import { escapeIdentifier } from 'pg';
import type { ListState } from '../../core/dashboard-reads';

/** Where each state's jobs are, on the index the queue page lists them by (dashboard-queries.ts). */
const WHERE: Record<ListState, string> = {
  waiting: `state = 'waiting' AND run_at <= now()`,
  delayed: `state = 'waiting' AND run_at > now()`,
  active: `state = 'active'`,
  'waiting-children': `state = 'waiting-children'`,
  completed: `state = 'completed'`,
  failed: `state = 'failed'`,
  cancelled: `state = 'cancelled'`,
};

/**
 * How many jobs of a queue are in `state` (of one job name; for a finished state, finished more
 * than `olderThanMs` ago), counting at most `cap`: what a filtered action or a clean by age
 * would take, for its confirmation. The state picks the table and a fixed condition; every value
 * is a bind parameter. $1 queue $2 cap, then the name and the age when given.
 */
export function buildMatchCount(
  schema: string,
  state: ListState,
  f: { queue: string; name: string | null; olderThanMs: number | null; cap: number },
): { text: string; values: unknown[] } {
  const live = state === 'waiting' || state === 'delayed' || state === 'active' || state === 'waiting-children';
  const table = `${escapeIdentifier(schema)}.${live ? 'jobs' : 'job_history'}`;
  const values: unknown[] = [f.queue, f.cap];
  const where = [`queue = $1`, WHERE[state]];
  if (f.name !== null) {
    values.push(f.name);
    where.push(`name = $${values.length}::text`);
  }
  if (!live && f.olderThanMs !== null) {
    values.push(f.olderThanMs);
    where.push(`finished_at < now() - $${values.length}::bigint::float8 * interval '1 millisecond'`);
  }
  return {
    text: `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${table} WHERE ${where.join(' AND ')} LIMIT $2::int) m`,
    values,
  };
}
