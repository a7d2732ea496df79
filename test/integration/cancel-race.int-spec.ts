import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { QueueService, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// queue.cancel(id) while the job changes state under it: a claim (waiting -> active) or an
// outcome (active -> waiting, a retry) that commits while cancel's statement runs. The test holds
// the job's row lock in its own transactions to interleave them deterministically: each time
// cancel is blocked on the row, the next state change queues behind it, and the current one
// commits. cancel must answer for the state the job has when it gets the row, never "no live
// job" (null) for a job that is live.

type State = 'waiting' | 'active';

describe('queue.cancel() racing a state change', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: Record<string, never> }>;
  const holders: PoolClient[] = [];

  beforeAll(async () => {
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'race' }] });
    queue = app.get(QueueService).getQueue('race');
  });
  afterAll(async () => {
    for (const h of holders) {
      await h.query('ROLLBACK').catch(() => undefined);
      h.release();
    }
    await app?.close();
  });

  /** The state change another node commits: a claim, or a retry's outcome. */
  const flip = (client: PoolClient, id: string, to: State) =>
    client.query(
      to === 'active'
        ? `UPDATE pgqueue.jobs SET state = 'active', attempt = attempt + 1, locked_by = 'racer', locked_until = now() + interval '1 hour',
             started_at = now() WHERE id = $1`
        : `UPDATE pgqueue.jobs SET state = 'waiting', locked_by = NULL, locked_until = NULL WHERE id = $1`,
      [id],
    );

  /** Backends of this database waiting on a lock, other than the test's own holders. */
  const blockedOthers = async (holderPids: number[]) =>
    Number(
      (
        await t.pool.query(
          `SELECT count(*) AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> ALL($1::int[]) AND pid <> pg_backend_pid()`,
          [holderPids],
        )
      ).rows[0].n,
    );
  const isBlocked = async (pid: number) =>
    (await t.pool.query(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [pid])).rows[0]?.wait_event_type ===
    'Lock';

  /**
   * Starts `cancel` while a held transaction has moved the job to `first`, then, up to `rounds`
   * times, queues the opposite change behind cancel and commits the held one. Returns cancel's answer.
   */
  async function cancelDuringFlips(id: string, first: State, rounds: number): Promise<'cancelled' | 'cancelling' | null> {
    const pool = testPool(t.db.url, rounds + 2);
    try {
      const pidOf = async (c: PoolClient) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      let held = await pool.connect();
      holders.push(held);
      const pids = [await pidOf(held)];
      await held.query('BEGIN');
      await flip(held, id, first);
      let answer: { value: 'cancelled' | 'cancelling' | null } | null = null;
      const cancel = queue.cancel(id).then((value) => (answer = { value }));
      await waitFor(async () => (await blockedOthers(pids)) === 1, { message: 'cancel to wait on the held row' });
      let to: State = first === 'active' ? 'waiting' : 'active';
      for (let round = 0; round < rounds && !answer; round++) {
        const next = await pool.connect();
        holders.push(next);
        const nextPid = await pidOf(next);
        pids.push(nextPid);
        await next.query('BEGIN');
        const queued = flip(next, id, to);
        await waitFor(() => isBlocked(nextPid), { message: `state change ${round + 2} to queue behind cancel` });
        await held.query('COMMIT');
        await queued;
        held = next;
        to = to === 'active' ? 'waiting' : 'active';
        // Either cancel answered, or it read the row again and waits on the next change.
        await waitFor(async () => answer !== null || (await blockedOthers(pids)) === 1, {
          message: 'cancel to answer or wait again',
        });
      }
      await cancel;
      await held.query('COMMIT');
      return answer!.value;
    } finally {
      for (const h of holders.splice(0)) {
        await h.query('ROLLBACK').catch(() => undefined);
        h.release();
      }
      await pool.end();
    }
  }

  const row = async (id: string) =>
    (await t.pool.query(`SELECT state, cancel_requested_at IS NOT NULL AS flagged FROM pgqueue.jobs WHERE id = $1`, [id]))
      .rows[0];
  const history = async (id: string) => (await t.pool.query(`SELECT state FROM pgqueue.job_history WHERE id = $1`, [id])).rows[0];

  it('a claim that commits while cancel waits: cancel flags the running job ("cancelling")', async () => {
    const job = await queue.add('x', {});
    expect(await cancelDuringFlips(job.id, 'active', 3)).toBe('cancelling');
    // The last committed change may have moved it back to waiting: the flag stays, so it is finished as cancelled when claimed.
    expect((await row(job.id)).flagged).toBe(true);
  });

  it('a retry that commits while cancel waits: cancel ends the waiting job ("cancelled")', async () => {
    const job = await queue.add('x', {});
    await t.pool.query(
      `UPDATE pgqueue.jobs SET state = 'active', attempt = 1, locked_by = 'racer', locked_until = now() + interval '1 hour' WHERE id = $1`,
      [job.id],
    );
    expect(await cancelDuringFlips(job.id, 'waiting', 3)).toBe('cancelled');
    expect(await history(job.id)).toEqual({ state: 'cancelled' });
  });
});
