import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { Client } from 'pg';
import { PgQueueConfigError, Process, Processor, QueueService, type Job } from '../../lib';
import { HistoryPartitions } from '../../lib/db/history/partitions';
import { migrate } from '../../lib/db/migrator';
import { bootApp, runtimeOf } from '../support/app';
import { testAdminUrl, testPool, useTestDatabase, waitFor } from '../support/database';

// The least-privilege setup of docs/security.md, as written there: a migration role owns the
// schema and runs the migrations; the app runs as a runtime role that is not a superuser, owns
// nothing but job_history_done (partition DDL needs it), and has the documented GRANTs. The
// suite's core runs as that role: enqueue, claim, complete, retry, cancel, a maintenance pass
// and the history partitions' upkeep.

@Processor('rr')
class RrProcessor {
  @Process('ok')
  ok(job: Job<{ n: number }>) {
    return { doubled: job.payload.n * 2 };
  }

  @Process('fails-once')
  failsOnce(job: Job) {
    if (job.attempt === 1) throw new Error('transient');
    return 'second time';
  }
}

/** The GRANTs of docs/security.md, "The runtime role" (keep the two in step). */
function runtimeGrants(run: string): string[] {
  return [
    `GRANT USAGE, CREATE ON SCHEMA pgqueue TO ${run}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgqueue TO ${run}`,
    `GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA pgqueue TO ${run}`,
    `ALTER DEFAULT PRIVILEGES IN SCHEMA pgqueue GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${run}`,
    `ALTER DEFAULT PRIVILEGES IN SCHEMA pgqueue GRANT USAGE, SELECT ON SEQUENCES TO ${run}`,
  ];
}

/** docs/security.md, "Partition upkeep": job_history_done and its partitions to the runtime role. */
const HAND_OVER = `
  DO $$
  DECLARE r record;
  BEGIN
    FOR r IN SELECT i.inhrelid::regclass AS part FROM pg_inherits i WHERE i.inhparent = 'pgqueue.job_history_done'::regclass
    LOOP
      EXECUTE format('ALTER TABLE %s OWNER TO app_runtime', r.part);
    END LOOP;
    ALTER TABLE pgqueue.job_history_done OWNER TO app_runtime;
  END $$`;

describe('a non-superuser runtime role with the documented grants, migrations run by another role', () => {
  const t = useTestDatabase();
  const tag = randomBytes(4).toString('hex');
  const mig = `pgq_migrator_${tag}`;
  const run = `pgq_runtime_${tag}`;
  const PASSWORD = `pw_${tag}`;
  let admin: Client;
  const urlAs = (role: string) => {
    const u = new URL(t.db.url);
    u.username = role;
    // A server that asks for passwords (the embedded one, SCRAM) gets the role's own.
    u.password = PASSWORD;
    return u.toString();
  };

  beforeAll(async () => {
    admin = new Client({ connectionString: testAdminUrl() });
    await admin.connect();
    await admin.query(`CREATE ROLE ${mig} LOGIN PASSWORD '${PASSWORD}'`);
    await admin.query(`CREATE ROLE ${run} LOGIN PASSWORD '${PASSWORD}'`);
    await admin.query(`GRANT CREATE ON DATABASE ${t.db.name} TO ${mig}`);
    // The migration role: migrations as the library runs them (migrate: true, or pgQueueMigrations()).
    const migPool = testPool(urlAs(mig), 1);
    try {
      await migrate(migPool, 'pgqueue');
      for (const g of runtimeGrants(run)) await migPool.query(g);
    } finally {
      await migPool.end();
    }
    // Partition DDL (ATTACH, DROP) needs the owner of job_history_done and of its partitions:
    // the migration role, made a member of the runtime role, hands them over (docs/security.md).
    await admin.query(`GRANT ${run} TO ${mig}`);
    const handOver = new Client({ connectionString: urlAs(mig) });
    await handOver.connect();
    await handOver.query(HAND_OVER.replaceAll('app_runtime', run));
    await handOver.end();
  });
  afterAll(async () => {
    // Whatever the roles own in the test database goes with it; their grants on it first.
    await t.db.drop();
    await admin.query(`DROP ROLE IF EXISTS ${run}`);
    await admin.query(`DROP ROLE IF EXISTS ${mig}`);
    await admin.end();
  });

  it('refuses to boot on a schema another role owns unless schemaOwner names it', async () => {
    const err = await bootApp({ options: { connection: urlAs(run), migrate: false, workers: false } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect((err as Error).message).toContain(`owned by the role "${mig}"`);
    expect((err as Error).message).toContain(`schemaOwner: '${mig}'`);
  });

  it('runs enqueue, claim, complete, retry, cancel, maintenance and partition upkeep as the runtime role', async () => {
    let app: INestApplicationContext | undefined;
    try {
      app = await bootApp({
        options: { connection: urlAs(run), migrate: false, schemaOwner: mig, pollIntervalMs: 100, rescueIntervalMs: 3_600_000 },
        queues: [{ name: 'rr', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10, jitter: false } } }],
        providers: [RrProcessor],
      });
      await app.init();
      const queues = app.get(QueueService);
      const ok = await queues.add('rr', 'ok', { n: 21 });
      const retried = await queues.add('rr', 'fails-once', {});
      const later = await queues.add('rr', 'ok', { n: 1 }, { delayMs: 3_600_000 });
      const done = (id: string) => async () => (await queues.getJob(id))?.state === 'completed';
      await waitFor(done(ok.id), { timeoutMs: 10_000, message: 'the job to complete' });
      await waitFor(done(retried.id), { timeoutMs: 10_000, message: 'the job to complete on its second attempt' });
      expect((await queues.getJob(ok.id))?.result).toEqual({ doubled: 42 });
      expect((await queues.getJob(retried.id))?.attempt).toBe(2);
      expect(await queues.getQueue('rr').cancel(later.id)).toBe('cancelled');

      // A stalled job, rescued by the maintenance pass this role runs.
      const rt = runtimeOf(app);
      const pool = rt.connections[0].pool;
      const { rows } = await pool.query<{ id: string }>(
        `INSERT INTO pgqueue.jobs (queue, name, payload, state, attempt, max_attempts, locked_by, locked_until)
         VALUES ('rr', 'ok', '{"n":2}', 'active', 1, 1, 'dead:1:x', now() - interval '1 minute') RETURNING id::text`,
      );
      const pass = await rt.connections[0].store.maintain(100);
      expect(pass?.stalled.map((s) => s.id)).toEqual([rows[0].id]);

      // The history upkeep: partitions created ahead for a day five days on, then dropped past retention.
      const parts = new HistoryPartitions(pool, 'pgqueue', 86_400_000);
      const ahead = Date.now() + 5 * 86_400_000;
      const created = await parts.runOnce(86_400_000 * 365, ahead);
      expect(created.created.length).toBeGreaterThan(0);
      expect(created.lockTimeouts).toBe(0);
      const dropped = await parts.runOnce(86_400_000, ahead + 10 * 86_400_000);
      expect(dropped.dropped).toEqual(expect.arrayContaining(created.created));
      const { rows: who } = await pool.query<{ me: string; su: boolean }>(
        `SELECT current_user AS me, rolsuper AS su FROM pg_roles WHERE rolname = current_user`,
      );
      expect(who[0]).toEqual({ me: run, su: false });
    } finally {
      await app?.close();
    }
  });
});
