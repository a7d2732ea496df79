// The dashboard's reads on a big database: p95 per read and the plan of each statement.
//
//   npm run build && node bench/dashboard-plans.mjs [--waiting=100000] [--history=1000000] [--reps=50]
//
// Needs DATABASE_URL (a server where this user may CREATE DATABASE); the database it creates is
// dropped at the end. Seeds `waiting` live jobs in two queues and `history` finished jobs
// (80 % completed, 15 % failed, 5 % cancelled, finished over the last hour), ANALYZEs, then
// times every read of the overview, a queue page and a job page through the built
// DashboardStore, and prints EXPLAIN (ANALYZE, BUFFERS) of each, so a plan that scans history
// without an index bound shows. Then it times each page's whole API answer end to end over HTTP:
// a Nest app (Express, workers off) mounting PgQueueDashboardModule on the same database, as
// the pages call it (the queue page asks for its counts and its first jobs page at once).
// Figures, not assertions: nothing here fails on timing.
import { createRequire } from 'node:module';
import pg from 'pg';

const require = createRequire(import.meta.url);
const arg = (name, dflt) => Number((process.argv.find((a) => a.startsWith(`--${name}=`)) ?? `=${dflt}`).split('=')[1]);
const WAITING = arg('waiting', 100_000);
const HISTORY = arg('history', 1_000_000);
const REPS = arg('reps', 50);
const admin = process.env.DATABASE_URL;
if (!admin) {
  console.error('Set DATABASE_URL to a server where this user may CREATE DATABASE.');
  process.exit(2);
}
const { migrate } = require('../dist/db/migrator.js');
const { DashboardStore } = require('../dist/db/dashboard-store.js');
const { buildJobList } = require('../dist/db/dashboard-queries.js');
require('reflect-metadata');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { PgQueueModule } = require('../dist');
const { PgQueueDashboardModule } = require('../dist/dashboard');

/** p50 and p95 of `reps` calls of `fn`, after one warm-up call. */
async function time(fn, reps) {
  await fn();
  const ms = [];
  for (let i = 0; i < reps; i++) {
    const s = performance.now();
    await fn();
    ms.push(performance.now() - s);
  }
  ms.sort((a, b) => a - b);
  return { p50: ms[Math.floor(ms.length / 2)], p95: ms[Math.floor(ms.length * 0.95)] };
}
const row = (label, { p50, p95 }) => console.log(`| ${label} | ${p50.toFixed(2)} | ${p95.toFixed(2)} |`);

const name = `pgq_dash_bench_${process.pid}`;
const adminPool = new pg.Pool({ connectionString: admin, max: 1 });
await adminPool.query(`CREATE DATABASE ${name}`);
const u = new URL(admin);
u.pathname = `/${name}`;
const pool = new pg.Pool({ connectionString: u.toString(), max: 4 });
let code = 0;
try {
  await migrate(pool, 'pgqueue');
  const t0 = Date.now();
  await pool.query(
    `INSERT INTO pgqueue.jobs (queue, name, payload, priority, run_at)
     SELECT CASE WHEN g % 2 = 0 THEN 'email' ELSE 'reports' END, 'job-' || (g % 5), jsonb_build_object('orderId', g),
            g % 3, now() - interval '1 minute' + (g % 10 = 0)::int * interval '1 hour'
     FROM generate_series(1, $1) g`,
    [WAITING],
  );
  await pool.query(
    `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at, locked_by)
     SELECT 10000000 + g, CASE WHEN g % 2 = 0 THEN 'email' ELSE 'reports' END, 'job-' || (g % 5), jsonb_build_object('orderId', g),
            CASE WHEN g % 20 < 16 THEN 'completed' WHEN g % 20 < 19 THEN 'failed' ELSE 'cancelled' END, 0, now(), 1, 3,
            CASE WHEN g % 20 < 16 THEN '[]'::jsonb ELSE '[{"attempt":1,"name":"Error","message":"boom","at":"2026-01-01T00:00:00Z"}]'::jsonb END,
            now() - interval '1 hour', now() - (g % 3600) * interval '1 second', 'bench-node'
     FROM generate_series(1, $1) g`,
    [HISTORY],
  );
  await pool.query('VACUUM ANALYZE pgqueue.jobs');
  await pool.query('VACUUM ANALYZE pgqueue.job_history');
  console.log(`seeded ${WAITING} live and ${HISTORY} finished jobs in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);

  const store = new DashboardStore(pool, 'pgqueue', 'pgqueue_jobs');
  const {
    rows: [{ id: liveId }],
  } = await pool.query(`SELECT id::text FROM pgqueue.jobs ORDER BY id DESC LIMIT 1`);
  const page1 = await store.listJobs('email', 'failed', {}, null, 50);
  const reads = {
    'overview: counts': () => store.counts(['email', 'reports']),
    'overview: throughput (first poll, whole hour)': () => store.throughput(),
    'overview: throughput (later polls, last 2 minutes)': () => store.throughput(new Date(Date.now() - 120_000)),
    'queue: counts': () => store.counts(['email', 'reports'], 'email'),
    'queue: names': () => store.names('email'),
    'jobs waiting p1': () => store.listJobs('email', 'waiting', {}, null, 50),
    'jobs delayed p1': () => store.listJobs('email', 'delayed', {}, null, 50),
    'jobs failed p2': () => store.listJobs('email', 'failed', {}, page1.next, 50),
    'jobs completed name=': () => store.listJobs('email', 'completed', { name: 'job-3' }, null, 50),
    'jobs completed payload @>': () => store.listJobs('email', 'completed', { payloadJson: '{"orderId":424242}' }, null, 50),
    'job (live)': () => store.job(liveId),
    'job (history)': () => store.job('10500000'),
    nodes: () => store.nodes(),
  };
  console.log('| read | p50 ms | p95 ms |\n| --- | --- | --- |');
  for (const [label, fn] of Object.entries(reads)) row(label, await time(fn, REPS));

  // The pages' API calls over HTTP, through the module, its guards and serialisation.
  class DashBenchModule {}
  Module({
    imports: [
      PgQueueModule.forRoot({ connection: u.toString(), workers: false }),
      PgQueueModule.registerQueue({ name: 'email' }, { name: 'reports' }),
      PgQueueDashboardModule.register({ public: true }),
    ],
  })(DashBenchModule);
  const app = await NestFactory.create(DashBenchModule, { logger: ['error', 'fatal'] });
  await app.listen(0, '127.0.0.1');
  try {
    const base = `${await app.getUrl()}/queues/api`;
    const get = async (path) => {
      const res = await fetch(`${base}${path}`);
      if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
      return res.json();
    };
    console.log('\n| page API call over HTTP | p50 ms | p95 ms |\n| --- | --- | --- |');
    const first = performance.now();
    await get('/overview');
    console.log(
      `| GET api/overview, first call after boot (counts the whole hour) | ${(performance.now() - first).toFixed(2)} | - |`,
    );
    row('GET api/overview', await time(() => get('/overview'), REPS));
    row(
      'GET api/queues/email + its first jobs page (waiting)',
      await time(() => Promise.all([get('/queues/email'), get('/queues/email/jobs?state=waiting')]), REPS),
    );
    row(
      'GET api/queues/email + its first jobs page (failed)',
      await time(() => Promise.all([get('/queues/email'), get('/queues/email/jobs?state=failed')]), REPS),
    );
    row('GET api/jobs/:id (live)', await time(() => get(`/jobs/${liveId}`), REPS));
    row('GET api/jobs/:id (history)', await time(() => get('/jobs/10500000'), REPS));
  } finally {
    await app.close();
  }

  const explain = async (label, text, values) => {
    const { rows } = await pool.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, values);
    console.log(`\n### ${label}\n${rows.map((r) => r['QUERY PLAN']).join('\n')}`);
  };
  const q = store.q;
  await explain('live counts (overview)', q.liveCounts, [['email', 'reports'], null]);
  await explain('history counts (overview)', q.historyCounts, [null]);
  await explain('live counts (queue page)', q.liveCounts, [['email', 'reports'], 'email']);
  await explain('history counts (queue page)', q.historyCounts, ['email']);
  await explain('throughput (first poll)', q.throughput, [null]);
  await explain('throughput (later polls)', q.throughput, [new Date(Date.now() - 120_000)]);
  await explain('names', q.names, ['email']);
  for (const [state, filters] of [
    ['waiting', {}],
    ['failed', {}],
    ['completed', { payloadJson: '{"orderId":424242}' }],
  ]) {
    const { text, values } = buildJobList('pgqueue', state, { queue: 'email', cursor: null, filters, limit: 50 });
    await explain(`job list ${state} ${JSON.stringify(filters)}`, text, values);
  }
  await explain('job', q.job, ['10500000']);
  await explain('nodes', q.nodes, []);
} catch (err) {
  console.error(err);
  code = 1;
} finally {
  await pool.end();
  await adminPool.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await adminPool.end();
  process.exit(code);
}
