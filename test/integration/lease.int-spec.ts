import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Pool } from 'pg';
import { LeaseLostError, Process, Processor, QueueService, type ActiveJob } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase, testPool } from '../support/database';
import { afterRescuePass } from '../support/rescue-pass';

const LEASE_MS = 4000;
const abortReasons = new Map<string, unknown>();
const ran: string[] = [];

@Processor('lease')
class LeaseProcessor {
  @Process('wait-for-abort')
  waitForAbort(job: ActiveJob) {
    return new Promise<string>((resolve) => {
      job.signal.addEventListener('abort', () => {
        abortReasons.set(job.id, job.signal.reason);
        resolve('finished after abort');
      });
    });
  }

  @Process('quick')
  quick(job: ActiveJob) {
    ran.push(job.id);
  }
}

describe('leases: heartbeat, lease loss, rescue', () => {
  let db: TestDatabase;
  let pool: Pool;
  let app: INestApplicationContext;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = testPool(db.url, 2);
    // leaseMs is LEASE_MS (13 heartbeats): a heartbeat a loaded machine delays by seconds must not
    // let the live job's lease run out, or the rescuer would take it (attempt 2) mid-test.
    app = await bootApp({
      options: {
        connection: db.url,
        leaseMs: LEASE_MS,
        heartbeatIntervalMs: 300,
        rescueIntervalMs: 200,
        pollIntervalMs: 200,
      },
      queues: [{ name: 'lease' }],
      providers: [LeaseProcessor],
    });
  });
  afterAll(async () => {
    await app?.close();
    await pool?.end();
    await db?.drop();
  });

  it('the heartbeat keeps a long job leased well past leaseMs', async () => {
    const job = await app.get(QueueService).add('lease', 'wait-for-abort', {});
    await waitFor(async () => (await app.get(QueueService).getJob(job.id))?.state === 'active', { timeoutMs: 20_000 });
    const first = (await pool.query('SELECT locked_until FROM pgqueue.jobs WHERE id = $1', [job.id])).rows[0]
      .locked_until as Date;
    await waitFor(
      async () => {
        const r = await pool.query('SELECT locked_until FROM pgqueue.jobs WHERE id = $1', [job.id]);
        // Renewed at a moment (database clock) after the first lease had expired.
        return +r.rows[0].locked_until > +first + LEASE_MS;
      },
      { timeoutMs: 20_000, message: 'lease to be renewed past its first expiry' },
    );
    // Not rescued by a rescue pass run after its first lease had expired: still attempt 1, still ours.
    await afterRescuePass(pool);
    const row = (await pool.query('SELECT attempt, locked_by FROM pgqueue.jobs WHERE id = $1', [job.id])).rows[0];
    expect(row).toEqual({ attempt: 1, locked_by: runtimeOf(app).supervisor.workerId });
    // Hand it over to "another worker": the next heartbeat notices and aborts the handler.
    const refusedBefore = runtimeOf(app).supervisor.unmatchedOutcomes;
    await pool.query(
      `UPDATE pgqueue.jobs SET locked_by = 'someone-else', locked_until = now() + interval '1 hour' WHERE id = $1`,
      [job.id],
    );
    await waitFor(() => abortReasons.has(job.id), { timeoutMs: 20_000, message: 'handler to be aborted' });
    expect(abortReasons.get(job.id)).toBeInstanceOf(LeaseLostError);
    // Its completion must not be written over the new owner's attempt: wait until the worker has
    // tried (its write came back matching no row), or until the row changed, then look.
    const owner = async () => (await pool.query('SELECT state, locked_by FROM pgqueue.jobs WHERE id = $1', [job.id])).rows[0];
    await waitFor(
      async () => runtimeOf(app).supervisor.unmatchedOutcomes > refusedBefore || (await owner())?.locked_by !== 'someone-else',
      {
        timeoutMs: 20_000,
        message: 'the old worker to attempt its completion',
      },
    );
    expect(await owner()).toEqual({ state: 'active', locked_by: 'someone-else' });
    expect(runtimeOf(app).supervisor.unmatchedOutcomes).toBe(refusedBefore + 1);
    await pool.query('DELETE FROM pgqueue.jobs WHERE id = $1', [job.id]);
  }, 60_000);

  it("the rescuer returns a dead worker's job to the queue, counting the attempt", async () => {
    const { rows } = await pool.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload, state, attempt, max_attempts, locked_by, locked_until, started_at)
       VALUES ('lease', 'quick', '{}', 'active', 1, 3, 'dead-worker', now() - interval '1 second', now() - interval '1 minute')
       RETURNING id`,
    );
    const id = String(rows[0].id);
    await waitFor(() => ran.includes(id), { timeoutMs: 20_000, message: 'rescued job to run' });
    await waitFor(async () => (await app.get(QueueService).getJob(id))?.state === 'completed', { timeoutMs: 20_000 });
    const job = (await app.get(QueueService).getJob(id))!;
    expect(job.attempt).toBe(2);
    expect(job.errors).toHaveLength(1);
    expect(job.errors[0]).toMatchObject({
      attempt: 1,
      name: 'LeaseExpiredError',
      message: expect.stringContaining('dead-worker'),
    });
  });

  it("a dead worker's job on its last attempt ends failed with the lease error", async () => {
    const { rows } = await pool.query(
      `INSERT INTO pgqueue.jobs (queue, name, payload, state, attempt, max_attempts, locked_by, locked_until)
       VALUES ('lease', 'quick', '{}', 'active', 2, 2, 'dead-worker', now() - interval '1 second') RETURNING id`,
    );
    const id = String(rows[0].id);
    await waitFor(async () => (await app.get(QueueService).getJob(id))?.state === 'failed', { timeoutMs: 20_000 });
    const job = (await app.get(QueueService).getJob(id))!;
    expect(job.errors.map((e) => e.name)).toEqual(['LeaseExpiredError']);
    expect(ran).not.toContain(id);
  });
});
