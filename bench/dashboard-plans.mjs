// The dashboard's reads on a big database: p95 per read and the plan of each statement.
//
//   npm run build && node bench/dashboard-plans.mjs [--waiting=100000] [--history=1000000] [--reps=50] [--http-reps=N]
//   (the queue page with 1,000,000 waiting jobs, in a few minutes: --waiting=1000000 --reps=5 --http-reps=20;
//   every fresh count of such a queue takes seconds, and --reps=50 made the run last past half an hour)
//
// Needs DATABASE_URL (a server where this user may CREATE DATABASE); the database it creates is
// dropped at the end. Seeds `waiting` live jobs in two queues (and 3 in a quiet one) and `history` finished jobs
// (80 % completed, 15 % failed, 5 % cancelled, finished over the last hour), ANALYZEs, then
// times every read of the overview, a queue page and a job page through the built
// DashboardStore, and prints EXPLAIN (ANALYZE, BUFFERS) of each, so a plan that scans history
// without an index bound shows. Then it times each page's whole API answer end to end over HTTP:
// a Nest app (Express, workers off) mounting PgQueueDashboardModule on the same database, as
// the pages call it (the queue page asks for its counts and its first jobs page at once).
// Beside wall-time percentiles, each row gives the CPU per call of the server's backends and of
// this process: on a shared machine wall time mostly measures the neighbours, CPU the work.
// Figures, not assertions: nothing here fails on timing.
import { createRequire } from 'node:module';
import pg from 'pg';
import { cpuSeconds } from './harness.mjs';

const require = createRequire(import.meta.url);
const arg = (name, dflt) => Number((process.argv.find((a) => a.startsWith(`--${name}=`)) ?? `=${dflt}`).split('=')[1]);
const WAITING = arg('waiting', 100_000);
const HISTORY = arg('history', 1_000_000);
const REPS = arg('reps', 50);
/** Calls per row over HTTP; the reads through the store above take REPS. */
const HTTP_REPS = arg('http-reps', REPS);
const admin = process.env.DATABASE_URL;
if (!admin) {
  console.error('Set DATABASE_URL to a server where this user may CREATE DATABASE.');
  process.exit(2);
}
const { migrate } = require('../dist/db/migrator.js');
const { HistoryPartitions } = require('../dist/db/history/partitions.js');
const { DashboardStore } = require('../dist/db/dashboard-store.js');
const { buildJobList } = require('../dist/db/dashboard-queries.js');
const { groupCountsSql, GROUP_SCAN_LIMIT } = require('../dist/db/group-counts.js');
require('reflect-metadata');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { PgQueueModule } = require('../dist');
const { PgQueueDashboardModule } = require('../dist/dashboard');
const { SETTLE_MS } = require('../dist/dashboard/dashboard-throughput.js');

/**
 * CPU seconds (user + system) each of the server's backends on the bench database has used so
 * far, by pid (/proc/<pid>/stat): a measure of the work a read costs that does not depend on
 * how busy the machine is, as wall time does. Null when the server is not on this machine (its
 * pids are not ours to read). Parallel workers are short-lived and not counted; none of the
 * plans below uses them.
 */
async function serverCpu() {
  const { rows } = await adminPool.query(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [name]);
  const cpu = new Map(rows.map(({ pid }) => [pid, cpuSeconds(pid)]));
  return [...cpu.values()].every((s) => s === null) ? null : cpu;
}

/** CPU ms between two readings; a backend that started since counts from 0, one that ended is lost. */
function cpuMs(before, after) {
  if (!before || !after) return null;
  let s = 0;
  for (const [pid, n] of after) if (n !== null) s += n - (before.get(pid) ?? 0);
  return s * 1000;
}

/**
 * p50, p95 and p99 of `reps` calls of `fn` (with fewer than 100 calls, p99 is the slowest), after one warm-up call, and the CPU per call: of the
 * server's backends on the bench database, and of this Node process (the app, its pool and the
 * HTTP client alike).
 */
async function time(fn, reps) {
  await fn();
  const ms = [];
  const cpu0 = await serverCpu();
  const node0 = process.cpuUsage();
  for (let i = 0; i < reps; i++) {
    const s = performance.now();
    await fn();
    ms.push(performance.now() - s);
  }
  const node = process.cpuUsage(node0);
  const cpu1 = await serverCpu();
  ms.sort((a, b) => a - b);
  return {
    p50: ms[Math.floor(ms.length / 2)],
    p95: ms[Math.floor(ms.length * 0.95)],
    p99: ms[Math.min(ms.length - 1, Math.ceil(ms.length * 0.99) - 1)],
    pgCpu: cpuMs(cpu0, cpu1) === null ? null : cpuMs(cpu0, cpu1) / reps,
    nodeCpu: (node.user + node.system) / 1000 / reps,
  };
}
const row = (label, { p50, p95, p99, pgCpu, nodeCpu }) =>
  console.log(
    `| ${label} | ${p50.toFixed(2)} | ${p95.toFixed(2)} | ${p99.toFixed(2)} | ${pgCpu === null ? '-' : pgCpu.toFixed(1)} | ${nodeCpu.toFixed(1)} |`,
  );
const HEAD =
  '| p50 ms | p95 ms | p99 ms | PostgreSQL CPU ms per call | Node CPU ms per call |\n| --- | --- | --- | --- | --- | --- |';

const EARLIER_NAMES = `
  SELECT DISTINCT name FROM (
    (SELECT name FROM pgqueue.jobs WHERE queue = $1 LIMIT 5000)
    UNION ALL
    (SELECT name FROM pgqueue.job_history WHERE queue = $1 ORDER BY state DESC, id DESC LIMIT 5000)
  ) n ORDER BY name`;

const name = `pgq_dash_bench_${process.pid}`;
const adminPool = new pg.Pool({ connectionString: admin, max: 1 });
await adminPool.query(`CREATE DATABASE ${name}`);
const u = new URL(admin);
u.pathname = `/${name}`;
const pool = new pg.Pool({ connectionString: u.toString(), max: 4 });
let code = 0;
try {
  await migrate(pool, 'pgqueue');
  // The history's partitions, as a running node's maintenance pass makes them (the last hour may
  // begin yesterday); without them the seeded rows would all sit in the default partition.
  const parts = new HistoryPartitions(pool, 'pgqueue', 86_400_000);
  const dbNow = Number((await pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n);
  await parts.runOnce(365 * 86_400_000, dbNow - 3_600_000);
  await parts.runOnce(365 * 86_400_000, dbNow);
  const t0 = Date.now();
  await pool.query(
    // email's jobs in 1,000 groups (issue 29), one tenant holding 90 % of them: its Groups panel.
    `INSERT INTO pgqueue.jobs (queue, name, payload, priority, run_at, group_key)
     SELECT CASE WHEN g % 2 = 0 THEN 'email' ELSE 'reports' END, 'job-' || (g % 5), jsonb_build_object('orderId', g),
            g % 3, now() - interval '1 minute' + (g % 10 = 0)::int * interval '1 hour',
            CASE WHEN g % 2 = 1 THEN NULL WHEN g % 20 < 18 THEN 'tenant-0' ELSE 'tenant-' || (1 + (g / 20) % 999) END
     FROM generate_series(1, $1) g`,
    [WAITING],
  );
  // A quiet queue among them: its page's job-name read must not walk the others' jobs.
  await pool.query(`INSERT INTO pgqueue.jobs (queue, name, payload) SELECT 'quiet', 'tick', '{}' FROM generate_series(1, 3)`);
  await pool.query(
    `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, created_at, finished_at, locked_by)
     SELECT 10000000 + g, CASE WHEN g % 2 = 0 THEN 'email' ELSE 'reports' END, 'job-' || (g % 5), jsonb_build_object('orderId', g),
            CASE WHEN g % 20 < 16 THEN 'completed' WHEN g % 20 < 19 THEN 'failed' ELSE 'cancelled' END, 0, now(), 1, 3,
            CASE WHEN g % 20 < 16 THEN '[]'::jsonb ELSE '[{"attempt":1,"name":"Error","message":"boom","at":"2026-01-01T00:00:00Z"}]'::jsonb END,
            now() - interval '1 hour', now() - (g % 3600) * interval '1 second', 'bench-node'
     FROM generate_series(1, $1) g
     -- In finish order, as the workers write them: what the ranged partitions' BRIN index on
     -- finished_at (migration 11) relies on for the throughput.
     ORDER BY g % 3600 DESC`,
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
  // A later poll recounts from the first minute not yet settled (DashboardService): at worst,
  // SETTLE_MS into a minute, the previous minute and those seconds, 70 s of history.
  const laterFrom = () => new Date(Date.now() - 60_000 - SETTLE_MS);
  const reads = {
    'overview: counts': () => store.counts(['email', 'reports']),
    'overview: throughput (first poll, whole hour)': () => store.throughput(),
    'overview: throughput (later polls, worst case: the last 70 s)': () => store.throughput(laterFrom()),
    // The queue page itself picks its row from the overview's counts (DashboardService); this is the one-queue form.
    'queue: counts of one queue': () => store.counts(['email', 'reports'], 'email'),
    'queue: names': () => store.names('email'),
    // Bounded: the first 10,000 due jobs in claim order and 10,000 running ones (lib/db/group-counts.ts).
    'queue: groups (the 20 busiest)': () => store.groups('email', 20),
    'queue: names (a quiet queue)': () => store.names('quiet'),
    // The names read before issue 25 (a LIMIT over jobs WHERE queue = $1, which no index serves), for comparison.
    'queue: names, the earlier statement (a quiet queue)': () => pool.query(EARLIER_NAMES, ['quiet']),
    'jobs waiting p1': () => store.listJobs('email', 'waiting', {}, null, 50),
    'jobs delayed p1': () => store.listJobs('email', 'delayed', {}, null, 50),
    'jobs failed p2': () => store.listJobs('email', 'failed', {}, page1.next, 50),
    'jobs completed name=': () => store.listJobs('email', 'completed', { name: 'job-3' }, null, 50),
    'jobs completed payload @>': () => store.listJobs('email', 'completed', { payloadJson: '{"orderId":424242}' }, null, 50),
    'job (live)': () => store.job(liveId),
    'job (history)': () => store.job('10500000'),
    nodes: () => store.nodes(),
  };
  console.log(`| read ${HEAD}`);
  for (const [label, fn] of Object.entries(reads)) row(label, await time(fn, REPS));

  // The pages' API calls over HTTP, through the module, its guards and serialisation.
  class DashBenchModule {}
  Module({
    imports: [
      PgQueueModule.forRoot({ connection: u.toString(), workers: false }),
      PgQueueModule.registerQueue({ name: 'email' }, { name: 'reports' }, { name: 'quiet' }),
      // countsBudget: 1 counts afresh on every call, as every 2 s poll does while a count takes
      // under 50 ms: the figures below are fresh answers, never ones reused from memory.
      // statementTimeoutMs: 60 s, so a fresh count of 1,000,000 waiting jobs on a loaded machine
      // is timed rather than cancelled at the 10 s default (a 503, which ended the run).
      PgQueueDashboardModule.register({ public: true, countsBudget: 1, statementTimeoutMs: 60_000 }),
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
    console.log(`\n| page API call over HTTP (${HTTP_REPS} calls each) ${HEAD}`);
    const first = performance.now();
    await get('/overview');
    console.log(
      `| GET api/overview, first call after boot (counts the whole hour) | ${(performance.now() - first).toFixed(2)} | - | - | - | - |`,
    );
    row('GET api/overview', await time(() => get('/overview'), HTTP_REPS));
    // The queue page's two polls, each alone: its detail (counts, names) and its jobs page.
    row('GET api/queues/email', await time(() => get('/queues/email'), HTTP_REPS));
    row('GET api/queues/email/jobs?state=waiting', await time(() => get('/queues/email/jobs?state=waiting'), HTTP_REPS));
    row('GET api/queues/email/groups', await time(() => get('/queues/email/groups'), HTTP_REPS));
    row(
      'GET api/queues/email + its first jobs page (waiting)',
      await time(() => Promise.all([get('/queues/email'), get('/queues/email/jobs?state=waiting')]), HTTP_REPS),
    );
    row(
      'GET api/queues/email + its first jobs page (failed)',
      await time(() => Promise.all([get('/queues/email'), get('/queues/email/jobs?state=failed')]), HTTP_REPS),
    );
    row(
      'GET api/queues/quiet + its first jobs page (waiting)',
      await time(() => Promise.all([get('/queues/quiet'), get('/queues/quiet/jobs?state=waiting')]), HTTP_REPS),
    );
    row('GET api/jobs/:id (live)', await time(() => get(`/jobs/${liveId}`), HTTP_REPS));
    row('GET api/jobs/:id (history)', await time(() => get('/jobs/10500000'), HTTP_REPS));
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
  await explain('throughput (later polls, worst case)', q.throughput, [laterFrom()]);
  await explain('names', q.names, ['email']);
  await explain('names (a quiet queue)', q.names, ['quiet']);
  await explain('groups (queue page)', groupCountsSql('pgqueue'), ['email', GROUP_SCAN_LIMIT, 20, 'busiest']);
  await explain('names, the earlier statement (a quiet queue)', EARLIER_NAMES, ['quiet']);
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
