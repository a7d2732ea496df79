import 'reflect-metadata';
import type { Pool } from 'pg';
import { JobStore, type NewJobRow } from '../../lib/db/job-store';
import { migrate } from '../../lib/db/migrator';
import { useTestDatabase } from '../support/database';
import { jobRow } from '../support/job-row';

// add() on the queue's own pool: once as many adds are in flight as the pool has connections,
// the next ones wait and leave together as one multi-row insert. Each caller still gets its own
// job (id, payload) once its row committed, and a row the database refuses fails only its own add.

function row(i: number, over: Partial<NewJobRow> = {}): NewJobRow {
  return jobRow({ queue: 'co', payload: { i }, ...over });
}

/** Counts the statements sent on `pool` (pool.query is all the store uses for these). */
function countQueries(pool: Pool): { readonly n: number } {
  const counter = { n: 0 };
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  (pool as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
    counter.n++;
    return query(...a);
  };
  return counter;
}

describe('coalesced single adds', () => {
  const t = useTestDatabase();
  let store: JobStore;
  let sent: { readonly n: number };

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    sent = countQueries(t.pool);
    store = new JobStore(t.pool, {
      schema: 'pgqueue',
      retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
      asyncCommit: true,
      // Unnamed statements: the suite also runs through PgBouncer in transaction mode.
      preparedStatements: false,
      poolSize: 1,
    });
  });

  it('adds beyond the pool size share statements, and each caller gets its own committed job', async () => {
    const before = sent.n;
    const out = await Promise.all(Array.from({ length: 30 }, (_, i) => store.insertCoalesced(row(i))));
    const statements = sent.n - before;
    // One alone, then the 29 that waited for it together (a batch holds up to 1,000).
    expect(statements).toBe(2);
    expect(new Set(out.map((o) => o.id)).size).toBe(30);
    const { rows } = await t.pool.query<{ id: string; i: number }>(
      `SELECT id::text, (payload->>'i')::int AS i FROM pgqueue.jobs WHERE id = ANY($1::bigint[])`,
      [out.map((o) => o.id)],
    );
    const byId = new Map(rows.map((r) => [r.id, r.i]));
    out.forEach((o, i) => expect(byId.get(o.id)).toBe(i));
  });

  it('a row the database refuses fails only its own add; the others of its batch are stored', async () => {
    // timeout_ms is an int column: 2^40 is out of range (SQLSTATE 22003), which add() would
    // have refused at enqueue; straight to the store here.
    const rows = Array.from({ length: 6 }, (_, i) => row(100 + i, i === 3 ? { timeoutMs: 2 ** 40 } : {}));
    const settled = await Promise.allSettled(rows.map((r) => store.insertCoalesced(r)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((settled[3] as PromiseRejectedResult).reason)).toMatch(/out of range/);
    const { rows: stored } = await t.pool.query<{ i: number }>(
      `SELECT (payload->>'i')::int AS i FROM pgqueue.jobs WHERE (payload->>'i')::int >= 100 ORDER BY 1`,
    );
    expect(stored.map((r) => r.i)).toEqual([100, 101, 102, 104, 105]);
  });
});
