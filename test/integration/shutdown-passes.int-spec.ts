import 'reflect-metadata';
import { Client } from 'pg';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// app.close() ends the queue's pool only once the maintenance pass the timer started has
// finished: a pass that outlived the pool failed with "Cannot use a pool after calling end on the
// pool" (seen when the scale benchmark's workers shut down).

describe('shutdown with a maintenance pass in flight', () => {
  const t = useTestDatabase();

  it('close() waits for the pass, which finishes without an error', async () => {
    // LISTEN set here on purpose (even poll-only through PgBouncer): its connection closing is
    // how the test sees that close() got past the listener, right before the pool is ended.
    const app = await bootApp({
      options: { connection: t.db.url, listenConnection: t.db.url, rescueIntervalMs: 100, pollIntervalMs: 100 },
    });
    await app.init();
    const errors: Error[] = [];
    runtimeOf(app).supervisor.on('error', (err: Error) => errors.push(err));
    const locker = new Client({ connectionString: t.db.url, application_name: 'test-locker' });
    await locker.connect();
    let closing: Promise<void> | undefined;
    try {
      await locker.query('BEGIN');
      // The pass's prune (DELETE FROM job_history) waits behind this lock, holding its transaction.
      await locker.query('LOCK TABLE pgqueue.job_history IN ACCESS EXCLUSIVE MODE');
      await waitFor(
        async () =>
          (await t.pool.query(`SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'pgqueue.job_history'::regclass`))
            .rowCount! > 0,
        { message: 'a maintenance pass to wait on the job_history lock' },
      );
      closing = app.close();
      await waitFor(
        async () =>
          (
            await t.pool.query(
              `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-pg-queue:listen'`,
            )
          ).rowCount === 0,
        { message: 'close() to stop the listener' },
      );
      await locker.query('COMMIT');
      await closing;
    } finally {
      await locker.end();
      await closing?.catch(() => undefined);
    }
    expect(errors.map((e) => e.message)).toEqual([]);
  });
});
