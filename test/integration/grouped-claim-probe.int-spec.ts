import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { bootApp } from '../support/app';
import { useTestDatabase } from '../support/database';

// Migration 20: the grouped claim's first probe (the next group after the worker's cursor) is an
// index condition, not a filter. Version 17 wrote it as `p_cursor IS NULL OR group_key > p_cursor`,
// which the function's cached plan could not push into the index: every claim walked the queue's
// grouped waiting jobs from the first group up to the cursor (90 ms a claim behind a flood group,
// bench/groups.mjs). Measured here in index blocks, not time: the claim runs in a transaction and
// reads its own count of blocks fetched from jobs_group_fifo_idx (pg_stat_get_xact_blocks_fetched).

const t = useTestDatabase();
const FLOOD = 30_000;

describe('claim_grouped: the probe after the cursor', () => {
  let app: INestApplicationContext;
  beforeAll(async () => {
    // Workers off: the claim is called by hand below.
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'tenants', group: {} }] });
    await t.pool.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload, group_key)
       SELECT 'tenants', 'job', '{}', 'a-flood' FROM generate_series(1, $1)`,
      [FLOOD],
    );
    await t.pool.query(`INSERT INTO pgqueue.jobs (queue, name, payload, group_key) VALUES ('tenants', 'job', '{}', 'b-small')`);
    await t.pool.query('VACUUM ANALYZE pgqueue.jobs');
  });
  afterAll(() => app?.close());

  /**
   * One claim of one job from `cursor`, in a transaction rolled back after; its rows, and the
   * blocks of the probe's index it read. Five calls that claim nothing (limit 0: the probe runs,
   * the claim takes no row) go first in the same session: PL/pgSQL plans a statement for its
   * first five calls with the parameters' values, then may keep one generic plan, where a cursor
   * of NULL or not is no longer known. The sixth call is the generic plan's.
   */
  async function claimFrom(cursor: string | null) {
    const c = await t.pool.connect();
    const claim = (limit: number) =>
      c.query<{ id: string | null; group_key: string | null; next_cursor: string | null }>(
        `SELECT c.id, c.group_key, c.next_cursor
         FROM pgqueue.claim_grouped('tenants', $1, 'node-a', 30000, $2, NULL, false, NULL, NULL, 20, false) c`,
        [limit, cursor],
      );
    const blocks = async () =>
      Number(
        (
          await c.query<{ n: string }>(
            `SELECT pg_catalog.pg_stat_get_xact_blocks_fetched('pgqueue.jobs_group_fifo_idx'::regclass) AS n`,
          )
        ).rows[0].n,
      );
    try {
      await c.query('BEGIN');
      for (let i = 0; i < 5; i++) await claim(0);
      const before = await blocks();
      const { rows } = await claim(1);
      return { rows, blocks: (await blocks()) - before };
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  }

  it('from a cursor, finds the next group without walking the groups before it', async () => {
    const { rows, blocks } = await claimFrom('a-flood');
    expect(rows.map((r) => r.group_key)).toEqual(['b-small']);
    // 30,000 entries of a-flood fill more than 60 leaf pages of the index: a walk over them reads
    // them all; the probes of one claim read a few pages (root, inner, leaf, per probe).
    const { rows: pages } = await t.pool.query<{ n: string }>(
      `SELECT pg_catalog.pg_relation_size('pgqueue.jobs_group_fifo_idx') / current_setting('block_size')::int AS n`,
    );
    expect(Number(pages[0].n)).toBeGreaterThan(60);
    expect(blocks).toBeLessThan(20);
  });

  it('without a cursor, starts from the first group', async () => {
    const { rows } = await claimFrom(null);
    expect(rows.map((r) => r.group_key)).toEqual(['a-flood']);
  });
});
