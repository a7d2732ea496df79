import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { migrate } from '../../lib/db/migrator';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Operations, "Connections": a process opens at most poolSize connections for the queue, plus
// one for LISTEN, and the application's own pool (here a TypeORM DataSource whose settings the
// queue reuses) is never used by the queue, so queue load cannot starve the app's queries.

const POOL_SIZE = 3;
const JOBS = 400;

@Processor('load')
class LoadProcessor {
  @Process()
  async run(job: Job<{ i: number }>) {
    // Long enough that many jobs run at once, each finishing while others are claimed.
    await sleep(5 + (job.payload.i % 10));
  }
}

describe('connections', () => {
  let app: INestApplicationContext;
  // Declared before useTestDatabase's, so it runs first (jest runs afterAll hooks in the order
  // declared): the app closes while its database still exists.
  afterAll(async () => {
    await app?.close();
  });
  const t = useTestDatabase();

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    // Which connections, by application_name, ran statements that write the queue's tables.
    await t.pool.query(`
      CREATE TABLE writer_apps (app text PRIMARY KEY);
      CREATE FUNCTION log_writer() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO public.writer_apps VALUES (current_setting('application_name')) ON CONFLICT DO NOTHING;
        RETURN NULL;
      END $$;
      CREATE TRIGGER log_jobs_writers AFTER INSERT OR UPDATE OR DELETE ON pgqueue.jobs
        FOR EACH STATEMENT EXECUTE FUNCTION log_writer();
      CREATE TRIGGER log_history_writers AFTER INSERT OR UPDATE OR DELETE ON pgqueue.job_history
        FOR EACH STATEMENT EXECUTE FUNCTION log_writer();`);
    app = await bootApp({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: t.db.url, applicationName: 'the-app', poolSize: 10 })],
      // No connection: the queue reuses the DataSource's settings for a pool of its own.
      options: { poolSize: POOL_SIZE, pollIntervalMs: 100 },
      queues: [{ name: 'load', concurrency: 50 }],
      providers: [LoadProcessor],
    });
  });

  it('the queue holds at most poolSize + 1 connections under load, and never runs a statement on the app pool', async () => {
    const sampler = new Client({ connectionString: t.db.url, application_name: 'test-sampler' });
    await sampler.connect();
    const most = { pool: 0, listen: 0, together: 0 };
    let sampling = true;
    const samples = (async () => {
      while (sampling) {
        const { rows } = await sampler.query<{ pool: number; listen: number }>(
          `SELECT count(*) FILTER (WHERE application_name = 'the-app:nestjs-pg-queue')::int AS pool,
                  count(*) FILTER (WHERE application_name = 'the-app:nestjs-pg-queue:listen')::int AS listen
           FROM pg_stat_activity WHERE datname = current_database()`,
        );
        most.pool = Math.max(most.pool, rows[0].pool);
        most.listen = Math.max(most.listen, rows[0].listen);
        most.together = Math.max(most.together, rows[0].pool + rows[0].listen);
      }
    })();
    try {
      // Every enqueue at once, while up to 50 jobs run, claim, complete and heartbeat.
      const queues = app.get(QueueService);
      await Promise.all(Array.from({ length: JOBS }, (_, i) => queues.add('load', 'x', { i })));
      const finished = async () =>
        (await t.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE state = 'completed'`))
          .rows[0].n;
      await waitFor(async () => (await finished()) === JOBS, {
        timeoutMs: 30_000,
        message: async () => `all ${JOBS} jobs to complete (${await finished()} so far)`,
      });
    } finally {
      sampling = false;
      await samples;
      await sampler.end();
    }
    // The load used the whole pool (so the cap was reached, not just respected) and no more.
    expect(most).toEqual({ pool: POOL_SIZE, listen: 1, together: POOL_SIZE + 1 });
    const writers = async () =>
      (await t.pool.query<{ app: string }>('SELECT app FROM writer_apps ORDER BY app')).rows.map((r) => r.app);
    expect(await writers()).toEqual(['the-app:nestjs-pg-queue']);

    // The check sees the app's connections when they do write: an enqueue with { manager } runs
    // on the app's transaction, as documented.
    const ds = app.get(DataSource);
    await ds.transaction((manager) => app.get(QueueService).add('load', 'x', { i: 0 }, { manager }));
    expect(await writers()).toEqual(['the-app', 'the-app:nestjs-pg-queue']);
  });
});
