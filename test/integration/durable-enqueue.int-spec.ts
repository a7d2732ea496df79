import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client, escapeIdentifier } from 'pg';
import { QueueService, type Queue } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase } from '../support/database';

// "Enqueues are always durable", whatever the server's default: here the database's own default
// is synchronous_commit = off (an app may run so for its own writes; the test server does too),
// and a deferred constraint trigger records, at each enqueue's COMMIT, the synchronous_commit
// that commit runs with. The queue's own enqueues must commit with it on; an enqueue in the
// caller's transaction leaves that setting, and so that commit, to the caller.

describe('durable enqueue', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { v: number } }>;

  beforeAll(async () => {
    await t.pool.query(`ALTER DATABASE ${escapeIdentifier(t.db.name)} SET synchronous_commit = off`);
    // No workers: nothing claims, so every row the trigger sees is an enqueue's.
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'dq' }] });
    await app.init();
    queue = app.get(QueueService).getQueue('dq');
    await t.pool.query(`
      CREATE TABLE commit_settings (job_id bigint PRIMARY KEY, sync text NOT NULL);
      CREATE FUNCTION record_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO commit_settings VALUES (NEW.id, current_setting('synchronous_commit'));
          RETURN NULL;
        END $$;
      -- Deferred: it fires inside COMMIT, so it sees the setting the commit itself runs with.
      CREATE CONSTRAINT TRIGGER record_commit_setting AFTER INSERT ON pgqueue.jobs
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_commit_setting();`);
  });
  afterAll(async () => {
    await app?.close();
  });

  const settingsOf = async (ids: string[]) =>
    (
      await t.pool.query<{ sync: string }>(`SELECT sync FROM commit_settings WHERE job_id = ANY($1::bigint[]) ORDER BY job_id`, [
        ids,
      ])
    ).rows.map((r) => r.sync);

  it('the database default really is off for a new session (else this file proves nothing)', async () => {
    const c = new Client({ connectionString: t.db.url });
    await c.connect();
    try {
      expect((await c.query(`SHOW synchronous_commit`)).rows[0].synchronous_commit).toBe('off');
    } finally {
      await c.end();
    }
  });

  it('add() and addBulk() on the queue’s own pool commit with synchronous_commit on', async () => {
    const one = await queue.add('x', { v: 1 });
    // Differing options, so the insert sends arrays (another statement text) for them.
    const bulk = await queue.addBulk([
      { name: 'x', payload: { v: 2 }, opts: { priority: 1 } },
      { name: 'x', payload: { v: 3 }, opts: { priority: 2, delayMs: 60_000 } },
    ]);
    const ids = [one.id, ...bulk.map((j) => j.id)];
    expect(await settingsOf(ids)).toEqual(['on', 'on', 'on']);
  });

  it('an add with a uniqueKey (the upsert statement) commits with synchronous_commit on', async () => {
    const job = await queue.add('x', { v: 4 }, { uniqueKey: 'k' });
    expect(await settingsOf([job.id])).toEqual(['on']);
  });

  it('a job scheduler’s tick commits with synchronous_commit on', async () => {
    await t.pool.query(
      `INSERT INTO pgqueue.job_schedulers (queue, id, every_ms, job_name, payload, next_run_at) VALUES ('dq', 'x', 60000, 'x', '{"v":5}', now())`,
    );
    expect(await runtimeOf(app).supervisor.tickSchedulers()).toBe(1);
    const { rows } = await t.pool.query<{ sync: string }>(
      `SELECT s.sync FROM commit_settings s JOIN pgqueue.jobs j ON j.id = s.job_id WHERE j.payload = '{"v": 5}'`,
    );
    expect(rows.map((r) => r.sync)).toEqual(['on']);
  });

  it('an add in the caller’s transaction ({ client }) leaves the commit to the caller: its own setting applies', async () => {
    const c = new Client({ connectionString: t.db.url });
    await c.connect();
    try {
      await c.query('BEGIN');
      const asIs = await queue.add('x', { v: 6 }, { client: c });
      await c.query('COMMIT');
      await c.query('BEGIN');
      await c.query(`SET LOCAL synchronous_commit = on`);
      const durable = await queue.add('x', { v: 7 }, { client: c });
      await c.query('COMMIT');
      expect(await settingsOf([asIs.id, durable.id])).toEqual(['off', 'on']);
    } finally {
      await c.end();
    }
  });
});
