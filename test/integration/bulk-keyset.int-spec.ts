import type { Pool } from 'pg';
import { LiveWalks } from '../../lib/db/bulk-live';
import { Changes } from '../../lib/db/change';
import { Cleaner } from '../../lib/db/clean';
import { migrate } from '../../lib/db/migrator';
import { StoreContext } from '../../lib/db/store-context';
import { testPool, useTestDatabase } from '../support/database';

// Issue 27, point 2: a batched operation continues from the last row it took (keyset), it does
// not take "the first batch that still matches" again, which reads once more the index entries
// of every row the batches before it deleted or moved: quadratic over a million rows. Measured by
// what it costs, not by time: the index pages one walk of many small batches reads, from the
// server's own counters (pg_statio_user_indexes), on a pool of one connection whose statistics
// the test flushes itself. A walk by keyset reads a few pages per batch; a walk that starts over
// reads, in its last batches, every leaf page the earlier ones emptied.

const ROWS = 20_000;
const BATCH = 100;
const BATCHES = ROWS / BATCH;

describe('batched operations walk by keyset', () => {
  const t = useTestDatabase();
  let pool: Pool;
  let ctx: StoreContext;

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    pool = testPool(t.db.url, 1);
    ctx = new StoreContext(pool as never, 'pgqueue', {
      retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
      asyncCommit: true,
      preparedStatements: false,
    });
  });
  afterAll(async () => {
    await pool?.end();
  });

  /**
   * What the indexes of `table` (and its partitions) whose definition matches `like` cost: the
   * pages read (hits and reads; a DELETE adds no index entry, so these are the scans'), or the
   * entries scans returned (an UPDATE that moves a row adds index entries, whose pages would count).
   */
  const counter = async (table: string, like: string, what: 'pages' | 'entries'): Promise<number> => {
    await pool.query('SELECT pg_catalog.pg_stat_force_next_flush()');
    const view = what === 'pages' ? 'pg_statio_user_indexes' : 'pg_stat_user_indexes';
    const sum = what === 'pages' ? 's.idx_blks_hit + s.idx_blks_read' : 's.idx_tup_read';
    const { rows } = await pool.query<{ n: string }>(
      `SELECT coalesce(sum(${sum}), 0)::bigint AS n
       FROM ${view} s JOIN pg_indexes i ON i.schemaname = s.schemaname AND i.indexname = s.indexrelname
       WHERE s.schemaname = 'pgqueue' AND (s.relname = $1 OR s.relname LIKE $1 || '\\_%') AND i.indexdef LIKE $2`,
      [table, like],
    );
    return Number(rows[0].n);
  };
  /** What `run` cost those indexes, on the one connection of `pool`. */
  const cost = async (
    table: string,
    like: string,
    what: 'pages' | 'entries',
    run: () => Promise<number>,
  ): Promise<{ n: number; cost: number }> => {
    const before = await counter(table, like, what);
    const n = await run();
    return { n, cost: (await counter(table, like, what)) - before };
  };

  it('clean: the history index, a few pages per batch', async () => {
    await t.pool.query(
      `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                        created_at, finished_at)
       SELECT g, 'q', 'x', '{}', 'failed', 0, now(), 1, 1, '[]', now(), now() - interval '1 day' FROM generate_series(1, $1::int) g`,
      [ROWS],
    );
    await t.pool.query('VACUUM ANALYZE pgqueue.job_history');
    const cleaner = new Cleaner(ctx, new LiveWalks(ctx, BATCH), BATCH);
    // A reader's old snapshot (a report, a backup) keeps the deleted rows' index entries alive,
    // so a scan that starts over is handed all of them again, every batch.
    const reader = await t.pool.connect();
    try {
      await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await reader.query('SELECT count(*) FROM pgqueue.job_history');
      // Every index of the history: the walk's and the id lookups of its deletes (one entry per row).
      const r = await cost('job_history', '%', 'entries', () => cleaner.cleanHistory('q', 'failed', 0, null));
      expect(r.n).toBe(ROWS);
      expect(r.cost).toBeLessThan(3 * ROWS);
    } finally {
      await reader.query('COMMIT');
      reader.release();
    }
  });

  it('drain and promoteJobs: the claim index, a few pages per batch', async () => {
    const claimIdx = '%(queue, priority, run_at, id)%';
    const seed = async (due: number, delayed: number) => {
      await t.pool.query(`DELETE FROM pgqueue.jobs`);
      await t.pool.query(
        `INSERT INTO pgqueue.jobs (queue, name, payload) SELECT 'q', 'x', '{}' FROM generate_series(1, $1::int)`,
        [due],
      );
      await t.pool.query(
        `INSERT INTO pgqueue.jobs (queue, name, payload, run_at) SELECT 'q', 'x', '{}', now() + interval '1 day' FROM generate_series(1, $1::int)`,
        [delayed],
      );
      await t.pool.query('VACUUM ANALYZE pgqueue.jobs');
    };
    // promoteJobs: 100,000 due jobs in front of the delayed ones in claim order, which a walk that
    // starts over reads again each batch (500 pages or so, 200 times). A promoted row also writes
    // new index entries (its run_at moves): about 3 pages each here, which no walk avoids.
    await seed(5 * ROWS, ROWS);
    const promoted = await cost('jobs', claimIdx, 'pages', () => new Changes(ctx).promoteMany('q', null, BATCH));
    expect(promoted.n).toBe(ROWS);
    expect(promoted.cost).toBeLessThan(4 * ROWS);

    // drain: deletes add no index entries; a few pages per batch.
    await seed(ROWS, ROWS);
    const drained = await cost('jobs', claimIdx, 'pages', () => new LiveWalks(ctx, BATCH).remove('q', 'queued', null));
    expect(drained.n).toBe(2 * ROWS);
    expect(drained.cost).toBeLessThan(6 * 2 * BATCHES);
  });
});
