// A flow's fan-in: one parent waiting on N children (default 10,000) across two queues, drained by
// one worker process (the built dist/, concurrency 50, pollIntervalMs 2000). Prints how long the
// insert of the whole tree took (one statement), how long the children took to drain, and the
// gap between the last child's completion and the parent's start (database clock): the release
// is in the last child's own outcome statement, and the NOTIFY it sends wakes the parent's queue.
//
//   npm run build && node bench/fan-in.mjs [--children=10000] [--reps=3]
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability, like bench/run.mjs. Figures are from one machine, shared or not: read
// them as orders of magnitude, next to bench/run.mjs's drain in the same conditions.

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
const CHILDREN = arg('children', 10_000);
const REPS = arg('reps', 3);

class Noop {
  run() {
    return 1;
  }
}
class Noop2 {
  run() {
    return 2;
  }
}
lib.Processor({ name: 'fan-a', concurrency: 50 })(Noop);
lib.Process()(Noop.prototype, 'run', Object.getOwnPropertyDescriptor(Noop.prototype, 'run'));
lib.Processor({ name: 'fan-b', concurrency: 50 })(Noop2);
lib.Process()(Noop2.prototype, 'run', Object.getOwnPropertyDescriptor(Noop2.prototype, 'run'));

async function once(adminUrl, rep) {
  const name = `fan_in_${process.pid}_${rep}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  class M {}
  Module({
    imports: [
      lib.PgQueueModule.forRoot({ connection: url.toString() }),
      lib.PgQueueModule.registerQueue({ name: 'fan-a' }, { name: 'fan-b' }),
    ],
    providers: [Noop, Noop2],
  })(M);
  const app = await NestFactory.createApplicationContext(M, { logger: false });
  await app.init();
  const sql = new pg.Client({ connectionString: url.toString() });
  await sql.connect();
  try {
    const queues = app.get(lib.QueueService);
    const t0 = performance.now();
    const flow = await queues.addFlow({
      queue: 'fan-a',
      name: 'parent',
      payload: {},
      children: Array.from({ length: CHILDREN }, (_, i) => ({ queue: i % 2 ? 'fan-b' : 'fan-a', name: 'child', payload: { i } })),
    });
    const insertMs = performance.now() - t0;
    for (;;) {
      const { rows } = await sql.query(`SELECT 1 FROM pgqueue.job_history WHERE id = $1`, [flow.job.id]);
      if (rows.length) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const totalMs = performance.now() - t0;
    const {
      rows: [g],
    } = await sql.query(
      `SELECT extract(epoch FROM p.started_at - c.last) * 1000 AS gap_ms, extract(epoch FROM c.last - c.first) * 1000 AS drain_ms
       FROM pgqueue.job_history p,
            (SELECT max(finished_at) AS last, min(started_at) AS first FROM pgqueue.job_history WHERE id <> $1) c
       WHERE p.id = $1`,
      [flow.job.id],
    );
    return { insertMs, totalMs, gapMs: Number(g.gap_ms), drainMs: Number(g.drain_ms) };
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
  console.log(`fan-in: 1 parent, ${CHILDREN} children over two queues, one process (concurrency 50 per queue), ${REPS} rep(s)`);
  console.log('| rep | insert of the tree (ms) | children drained (ms) | last child done -> parent started (ms) | total (ms) |');
  console.log('| --- | --- | --- | --- | --- |');
  for (let r = 1; r <= REPS; r++) {
    const x = await once(adminUrl, r);
    console.log(
      `| ${r} | ${x.insertMs.toFixed(0)} | ${x.drainMs.toFixed(0)} | ${x.gapMs.toFixed(1)} | ${x.totalMs.toFixed(0)} |`,
    );
  }
} catch (err) {
  console.error(err);
  code = 1;
} finally {
  await server?.stop();
}
process.exit(code);
