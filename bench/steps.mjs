// Durable steps' cost (issue 31): a job of 10 job.step() calls against 10 chained jobs (each job
// enqueues the next, the usual way to split work in steps without them), against N plain no-op
// jobs (the drain durable steps must leave unchanged), and against the raw-SQL floor of what a
// step records: 10 single-row INSERTs in autocommit from one client (synchronous_commit off, as
// the records commit), measured in the same run.
//
//   npm run build && node bench/steps.mjs [--jobs=500] [--reps=3]
//
// One process, the built dist/, concurrency 20, against DATABASE_URL (it must allow CREATE
// DATABASE) or a throwaway embedded PostgreSQL, like bench/fan-in.mjs. Figures are from one
// machine, shared or not: read them side by side, not as absolutes.

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
const JOBS = arg('jobs', 500);
const REPS = arg('reps', 3);
const STEPS = 10;

let chainQueue = null;

class Plain {
  run() {
    return 1;
  }
}
class Stepped {
  async run(job) {
    let sum = 0;
    for (let i = 0; i < STEPS; i++) sum += await job.step(`s${i}`, () => i);
    return sum;
  }
}
class Chained {
  async run(job) {
    const n = job.payload.n;
    if (n + 1 < STEPS) await chainQueue.add('link', { n: n + 1 });
    return n;
  }
}
for (const [cls, name] of [
  [Plain, 'plain'],
  [Stepped, 'stepped'],
  [Chained, 'chained'],
]) {
  lib.Processor({ name, concurrency: 20 })(cls);
  lib.Process()(cls.prototype, 'run', Object.getOwnPropertyDescriptor(cls.prototype, 'run'));
}

async function until(sql, queue, count) {
  for (;;) {
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = $1`, [queue]);
    if (rows[0].n >= count) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function once(adminUrl, rep) {
  const name = `steps_${process.pid}_${rep}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  class M {}
  Module({
    imports: [
      lib.PgQueueModule.forRoot({ connection: url.toString(), pollIntervalMs: 1000 }),
      lib.PgQueueModule.registerQueue({ name: 'plain' }, { name: 'stepped' }, { name: 'chained' }),
    ],
    providers: [Plain, Stepped, Chained],
  })(M);
  const app = await NestFactory.createApplicationContext(M, { logger: false });
  await app.init();
  const sql = new pg.Client({ connectionString: url.toString() });
  await sql.connect();
  try {
    const queues = app.get(lib.QueueService);
    chainQueue = queues.getQueue('chained');
    const out = {};
    const time = async (label, fn) => {
      const t0 = performance.now();
      await fn();
      out[label] = performance.now() - t0;
    };
    await time('plain', async () => {
      await queues.getQueue('plain').addBulk(Array.from({ length: JOBS }, () => ({ name: 'job', payload: {} })));
      await until(sql, 'plain', JOBS);
    });
    await time('stepped', async () => {
      await queues.getQueue('stepped').addBulk(Array.from({ length: JOBS }, () => ({ name: 'job', payload: {} })));
      await until(sql, 'stepped', JOBS);
    });
    await time('chained', async () => {
      await chainQueue.addBulk(Array.from({ length: JOBS }, () => ({ name: 'link', payload: { n: 0 } })));
      await until(sql, 'chained', JOBS * STEPS);
    });
    await sql.query('CREATE TABLE raw_steps (job_id bigint, name text, result jsonb, PRIMARY KEY (job_id, name))');
    // The records' own durability: synchronous_commit off, as the library's step records commit.
    await sql.query('SET synchronous_commit = off');
    await time('raw', async () => {
      for (let j = 0; j < JOBS; j++) {
        for (let i = 0; i < STEPS; i++) {
          await sql.query('INSERT INTO raw_steps VALUES ($1, $2, $3::jsonb)', [j, `s${i}`, String(i)]);
        }
      }
    });
    return out;
  } finally {
    await sql.end();
    await app.close();
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const server = process.env.DATABASE_URL ? null : await startPostgres({ durable: true });
const adminUrl = process.env.DATABASE_URL ?? server.url;
let code = 0;
try {
  console.log(`steps: ${JOBS} jobs per case, ${STEPS} steps each, one process (concurrency 20), ${REPS} rep(s); ms per job`);
  console.log(
    '| rep | plain no-op job | job of 10 steps | 10 chained jobs | raw SQL: 10 INSERTs (async commit), one client, serial | step overhead (ms per step) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (let r = 1; r <= REPS; r++) {
    const x = await once(adminUrl, r);
    const per = (ms) => (ms / JOBS).toFixed(2);
    console.log(
      `| ${r} | ${per(x.plain)} | ${per(x.stepped)} | ${per(x.chained)} | ${per(x.raw)} | ${((x.stepped - x.plain) / JOBS / STEPS).toFixed(3)} |`,
    );
  }
} catch (err) {
  console.error(err);
  code = 1;
} finally {
  await server?.stop();
}
process.exit(code);
