// Batch handlers (issue 29, point 5): the drain of N jobs (default 20,000) whose work is one row
// into a sink table, done three ways in one run on one database:
//   raw SQL   the floor: one connection claims 100 jobs of a plain table with SKIP LOCKED and
//             moves them into the sink, one statement per 100 (no lease, no history, no events)
//   single    the library, @Process('sink'): one INSERT per job (concurrency 100, a pool of 10)
//   batch     the library, @Process({ name: 'sink', batch: { size: 100 } }): one INSERT ... unnest
//             per call of up to 100 jobs (concurrency 200, so the next batch collects while one runs)
// Jobs are added while the queue is paused; the clock runs from resume() until the last job is in
// history. Prints jobs/s of each.
//
//   npm run build && node bench/batch.mjs [--jobs=20000] [--reps=1]
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability, like bench/run.mjs. One machine's figures, shared or not: read them
// side by side, as ratios, not as absolute numbers.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres } from '../scripts/pg-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
require('reflect-metadata');
const lib = require(path.join(here, '..', 'dist'));
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');

const arg = (name, dflt) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt);
const JOBS = arg('jobs', 20_000);
const REPS = arg('reps', 1);
const BATCH = 100;

/** The sink's pool: the handlers' own writes, as an app's would be. */
let sinkPool = null;

class Single {
  async run(job) {
    await sinkPool.query('INSERT INTO sink (v) VALUES ($1)', [job.payload.v]);
  }
}
class Batched {
  async run(jobs) {
    await sinkPool.query('INSERT INTO sink (v) SELECT unnest($1::int[])', [jobs.map((j) => j.payload.v)]);
  }
}
lib.Processor({ name: 'single', concurrency: 100 })(Single);
lib.Process('sink')(Single.prototype, 'run', Object.getOwnPropertyDescriptor(Single.prototype, 'run'));
lib.Processor({ name: 'batched', concurrency: 2 * BATCH })(Batched);
lib.Process({ name: 'sink', batch: { size: BATCH, waitMs: 20 } })(
  Batched.prototype,
  'run',
  Object.getOwnPropertyDescriptor(Batched.prototype, 'run'),
);

async function withDatabase(adminUrl, tag, fn) {
  const name = `batch_bench_${process.pid}_${tag}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  try {
    return await fn(url.toString());
  } finally {
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  }
}

/** The floor: plain table, one statement per 100 jobs, one connection. */
async function rawSql(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, v int NOT NULL); CREATE TABLE sink (v int NOT NULL)');
    await c.query('INSERT INTO raw_jobs (v) SELECT g FROM generate_series(1, $1) g', [JOBS]);
    const t0 = performance.now();
    for (;;) {
      const r = await c.query(
        `WITH claimed AS (
           DELETE FROM raw_jobs WHERE id IN (SELECT id FROM raw_jobs ORDER BY id LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
           RETURNING v)
         INSERT INTO sink (v) SELECT v FROM claimed`,
      );
      if (r.rowCount === 0) break;
    }
    return JOBS / ((performance.now() - t0) / 1000);
  } finally {
    await c.end();
  }
}

/** The library: add N jobs to a paused queue, resume, wait until all N are in history. */
async function library(url, queue, provider) {
  class M {}
  Module({
    imports: [lib.PgQueueModule.forRoot({ connection: url }), lib.PgQueueModule.registerQueue({ name: queue })],
    providers: [provider],
  })(M);
  const app = await NestFactory.createApplicationContext(M, { logger: ['error'] });
  await app.init();
  sinkPool = new pg.Pool({ connectionString: url, max: 10 });
  // end() resolves before its idle clients closed: the DROP DATABASE ... WITH (FORCE) after may end one.
  sinkPool.on('error', () => undefined);
  const sql = new pg.Client({ connectionString: url });
  await sql.connect();
  try {
    await sql.query('CREATE TABLE IF NOT EXISTS sink (v int NOT NULL)');
    const q = app.get(lib.QueueService).getQueue(queue);
    await q.pause();
    for (let i = 0; i < JOBS; i += 5000) {
      await q.addBulk(Array.from({ length: Math.min(5000, JOBS - i) }, (_, k) => ({ name: 'sink', payload: { v: i + k } })));
    }
    const t0 = performance.now();
    await q.resume();
    for (;;) {
      const { rows } = await sql.query('SELECT count(*)::int AS n FROM sink');
      if (rows[0].n >= JOBS) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    // The sink holds every row once the handlers ran; the outcomes may still be in flight.
    for (;;) {
      const { rows } = await sql.query('SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1', [queue]);
      if (rows[0].n >= JOBS) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    return JOBS / ((performance.now() - t0) / 1000);
  } finally {
    await sql.end();
    await app.close();
    await sinkPool.end();
  }
}

const server = process.env.DATABASE_URL ? null : await startPostgres({ durable: true });
const adminUrl = process.env.DATABASE_URL ?? server.url;
let code = 0;
try {
  console.log(`batch: ${JOBS} jobs, each one row into a sink table; batches of ${BATCH}; ${REPS} rep(s)`);
  console.log(
    '| rep | raw SQL, 100 per statement (jobs/s) | single handler (jobs/s) | batch handler, 100 per call (jobs/s) | batch / single |',
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (let r = 1; r <= REPS; r++) {
    const raw = await withDatabase(adminUrl, `raw${r}`, rawSql);
    const single = await withDatabase(adminUrl, `single${r}`, (url) => library(url, 'single', Single));
    const batched = await withDatabase(adminUrl, `batched${r}`, (url) => library(url, 'batched', Batched));
    console.log(
      `| ${r} | ${raw.toFixed(0)} | ${single.toFixed(0)} | ${batched.toFixed(0)} | ${(batched / single).toFixed(2)}x |`,
    );
  }
} catch (err) {
  console.error(err);
  code = 1;
} finally {
  await server?.stop();
}
process.exit(code);
