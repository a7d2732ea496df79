import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import { Process, Processor } from '../../lib';
import { lockKey } from '../../lib/db/transaction';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Maintenance is elected per pass by a transaction-scoped advisory lock: while one node's pass
// holds it, no other node's pass runs; when that node dies its transaction ends, the lock with
// it, and the next pass of any other node takes over.

@Processor('el')
class ElProcessor {
  @Process()
  run() {}
}

describe('maintenance election and failover', () => {
  const t = useTestDatabase();

  /** A job whose worker died: active, its lease long expired. */
  async function stalledJob(): Promise<string> {
    const { rows } = await t.pool.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload, state, attempt, locked_by, locked_until)
       VALUES ('el', 'x', '{}', 'active', 1, 'dead-host:1:beef', now() - interval '1 minute') RETURNING id::text`,
    );
    return rows[0].id;
  }
  const stateOf = async (id: string) =>
    (
      await t.pool.query(
        `SELECT state FROM pgqueue.jobs WHERE id = $1 UNION ALL SELECT state FROM pgqueue.job_history WHERE id = $1`,
        [id],
      )
    ).rows[0]?.state;

  it('no pass runs while another node holds the election, and another node takes over once that node is gone', async () => {
    // The election lock is taken here, as by a node in the middle of a pass.
    const holder = new Client({ connectionString: t.db.url });
    holder.on('error', () => undefined);
    const options = { connection: t.db.url, pollIntervalMs: 100, rescueIntervalMs: 3_600_000 };
    const a: INestApplicationContext = await bootApp({ options, queues: [{ name: 'el' }], providers: [ElProcessor] });
    const b: INestApplicationContext = await bootApp({ options, queues: [{ name: 'el' }], providers: [ElProcessor] });
    try {
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey('nestjs-pg-queue:maintenance:pgqueue')]);
      const id = await stalledJob();
      expect(await runtimeOf(a).store.maintain(1000)).toBeNull();
      expect(await runtimeOf(b).store.maintain(1000)).toBeNull();
      expect(await stateOf(id)).toBe('active'); // nobody rescued it: the pass belongs to the holder

      // The holder dies mid-pass: its session ends, and the lock with its transaction.
      await holder.end();
      await a.close();
      const r = await runtimeOf(b).store.maintain(1000);
      expect(r?.stalled.map((s) => s.id)).toEqual([id]);
      await waitFor(async () => (await stateOf(id)) === 'completed', { message: 'the rescued job to run on the surviving node' });
    } finally {
      await holder.end().catch(() => undefined);
      await a.close();
      await b.close();
    }
  });

  it('the surviving node’s own timer takes over within rescueIntervalMs', async () => {
    const options = { connection: t.db.url, pollIntervalMs: 100, rescueIntervalMs: 300 };
    const a = await bootApp({ options, queues: [{ name: 'el' }], providers: [ElProcessor] });
    const b = await bootApp({ options, queues: [{ name: 'el' }], providers: [ElProcessor] });
    try {
      await a.close();
      const id = await stalledJob();
      await waitFor(async () => (await stateOf(id)) === 'completed', {
        timeoutMs: 5000,
        message: 'node b to rescue and run the job',
      });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
