// The operator's bulk calls at a million jobs (issue 27): `node bench/run.mjs --only=ops` or
// `node bench/ops.mjs`, with `--ops-jobs=N` (default 1,000,000; smoke: `--smoke`, 2,000).
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// (scripts/pg-server.mjs), in a fresh database. For each call (retryJobs, removeJobs, clean,
// cancelJobs of waiting jobs, promoteJobs, drain) the rows it changes are written first (N jobs of
// queue 'ops', then VACUUM ANALYZE, as a table in use would be), then changed three ways in turn,
// each on a fresh copy of the same rows:
//   lib     the library's call (the built dist/, in this process, workers off)
//   raw-1   plain SQL: one statement that changes every row (the shortest, and the lock of N rows)
//   raw-b   plain SQL: a loop of statements of 1,000 rows that each take "the first 1,000 that
//           still match" (what clean did before it walked by keyset): batches, but each reads
//           again what the ones before it changed
// and for each prints: seconds, rows per second, the most rows one statement changed or locked
// (lib: the `found`/`n` each of its statements reports; raw: rowCount), WAL written
// (pg_current_wal_lsn before and after) and the longest and the 99th-percentile latency of a claim
// loop that runs all along on another queue of the same table (queue 'other', 1,000 waiting jobs:
// `SELECT ... FOR UPDATE SKIP LOCKED LIMIT 10` on jobs_claim_idx, the claim's read and locks, in
// a loop on its own connection). The claim loop writes a little WAL of its own (row locks), in
// every column alike.

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres } from '../scripts/pg-server.mjs';
import { withDatabase } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const require = createRequire(import.meta.url);

const OTHER_JOBS = 1000;

/** Rows of queue 'ops' written for one call. */
const SEED = {
  history: (state) => `
    INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors,
                                     created_at, finished_at)
    SELECT 100000000 + g, 'ops', 'x', '{}', '${state}', 0, now(), 1, 1, '[]', now(), now() - interval '2 hours'
    FROM generate_series(1, $1::int) g`,
  waiting: `INSERT INTO pgqueue.jobs (queue, name, payload) SELECT 'ops', 'x', '{}' FROM generate_series(1, $1::int)`,
  delayed: `INSERT INTO pgqueue.jobs (queue, name, payload, run_at) SELECT 'ops', 'x', '{}', now() + interval '1 day' FROM generate_series(1, $1::int)`,
};

const HISTORY_INSERT = `INSERT INTO pgqueue.jobs (id, queue, name, payload, priority, run_at, attempt, max_attempts, backoff, timeout_ms,
                                               errors, created_at, progress, trace)
  OVERRIDING SYSTEM VALUE SELECT id, queue, name, payload, priority, now(), 0, max_attempts, backoff, timeout_ms, errors, created_at,
                                 progress, trace FROM h`;
const CANCEL_INSERT = `INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, backoff,
                                                       timeout_ms, errors, created_at, started_at, finished_at, progress, trace)
  SELECT id, queue, name, payload, 'cancelled', priority, run_at, attempt, max_attempts, backoff, timeout_ms, errors, created_at,
         started_at, now(), progress, trace FROM g`;

/** Each call: its seed, the library's call, one statement, and one naive batch (looped until it changes nothing). */
const OPS = [
  {
    name: 'retryJobs (failed)',
    seed: SEED.history('failed'),
    lib: (q) => q.retryJobs({ state: 'failed' }),
    raw1: `WITH h AS (DELETE FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' RETURNING *) ${HISTORY_INSERT}`,
    rawB: `WITH h AS (DELETE FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' AND id = ANY(ARRAY(
             SELECT id FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' LIMIT 1000)) RETURNING *) ${HISTORY_INSERT}`,
  },
  {
    name: 'removeJobs (completed)',
    seed: SEED.history('completed'),
    lib: (q) => q.removeJobs({ state: 'completed' }),
    raw1: `DELETE FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'completed'`,
    rawB: `DELETE FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'completed' AND id = ANY(ARRAY(
             SELECT id FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'completed' LIMIT 1000))`,
  },
  {
    name: 'clean (failed, olderThanMs 1 h)',
    seed: SEED.history('failed'),
    lib: (q) => q.clean({ state: 'failed', olderThanMs: 3_600_000 }),
    raw1: `DELETE FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' AND finished_at < now() - interval '1 hour'`,
    rawB: `DELETE FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' AND id = ANY(ARRAY(
             SELECT id FROM pgqueue.job_history WHERE queue = 'ops' AND state = 'failed' AND finished_at < now() - interval '1 hour' LIMIT 1000))`,
  },
  {
    name: 'cancelJobs (waiting)',
    seed: SEED.waiting,
    lib: (q) => q.cancelJobs({ state: 'waiting' }),
    raw1: `WITH g AS (DELETE FROM pgqueue.jobs WHERE queue = 'ops' AND state = 'waiting' AND run_at <= now() RETURNING *) ${CANCEL_INSERT}`,
    rawB: `WITH p AS (SELECT id FROM pgqueue.jobs WHERE queue = 'ops' AND state = 'waiting' AND run_at <= now() LIMIT 1000 FOR UPDATE SKIP LOCKED),
           g AS (DELETE FROM pgqueue.jobs j USING p WHERE j.id = p.id RETURNING j.*) ${CANCEL_INSERT}`,
  },
  {
    name: 'promoteJobs',
    seed: SEED.delayed,
    lib: (q) => q.promoteJobs(),
    raw1: `UPDATE pgqueue.jobs SET run_at = now() WHERE queue = 'ops' AND state = 'waiting' AND run_at > now()`,
    rawB: `WITH p AS (SELECT id FROM pgqueue.jobs WHERE queue = 'ops' AND state = 'waiting' AND run_at > now() LIMIT 1000 FOR UPDATE SKIP LOCKED)
           UPDATE pgqueue.jobs j SET run_at = now() FROM p WHERE j.id = p.id`,
  },
  {
    name: 'drain',
    seed: SEED.waiting,
    lib: (q) => q.drain(),
    raw1: `DELETE FROM pgqueue.jobs WHERE queue = 'ops' AND state = 'waiting'`,
    rawB: `WITH p AS (SELECT id FROM pgqueue.jobs WHERE queue = 'ops' AND state = 'waiting' LIMIT 1000 FOR UPDATE SKIP LOCKED)
           DELETE FROM pgqueue.jobs j USING p WHERE j.id = p.id`,
  },
];

/** A claim loop on queue 'other' of the same table, on its own connection: every statement's latency while `recording`. */
function claimLoop(url) {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-claim' });
  const state = { stop: false, latencies: [], done: null };
  state.done = (async () => {
    await client.connect();
    try {
      while (!state.stop) {
        const t = performance.now();
        await client.query(
          `SELECT id FROM pgqueue.jobs WHERE queue = 'other' AND state = 'waiting' AND run_at <= now()
           ORDER BY priority, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED`,
        );
        state.latencies.push(performance.now() - t);
      }
    } finally {
      await client.end();
    }
  })();
  return state;
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : 0;
}

/** The most rows one statement of the library reported (its `found`, else its `n`), while `on`. */
function statementRows() {
  const rec = { on: false, max: 0, statements: 0 };
  // The library's batches run on its pool (pool.query, a promise; the pool calls the client with
  // a callback, so the client's query returns nothing to watch).
  const orig = pg.Pool.prototype.query;
  pg.Pool.prototype.query = function (...args) {
    const r = orig.apply(this, args);
    if (rec.on && r && typeof r.then === 'function') {
      r.then(
        (res) => {
          const row = res?.rows?.[0];
          const n = typeof row?.found === 'number' ? row.found : typeof row?.n === 'number' ? row.n : null;
          if (n !== null) {
            rec.max = Math.max(rec.max, n);
            rec.statements += 1;
          }
        },
        () => undefined,
      );
    }
    return r;
  };
  return rec;
}

async function bootLibrary(url) {
  require('reflect-metadata');
  const pkg = require(path.join(root, 'dist'));
  const { Module } = require('@nestjs/common');
  const { NestFactory } = require('@nestjs/core');
  class OpsModule {}
  Module({
    imports: [
      pkg.PgQueueModule.forRoot({ connection: url, workers: false }),
      pkg.PgQueueModule.registerQueue({ name: 'ops' }, { name: 'other' }),
    ],
  })(OpsModule);
  const app = await NestFactory.createApplicationContext(OpsModule, { logger: ['warn', 'error'] });
  return { app, queue: app.get(pkg.QueueService).getQueue('ops') };
}

export async function opsBench({ url: adminUrl, jobs, log = (s) => process.stderr.write(s) }) {
  return withDatabase(adminUrl, `bench_ops_${jobs}`, async (client, url) => {
    const rows = statementRows();
    const { app, queue } = await bootLibrary(url);
    const results = [];
    let idle = null;
    try {
      // The yardstick: the claim loop alone on the same rows, before any call runs (this machine's
      // own scheduling and fsync stalls show here too).
      await client.query(
        `INSERT INTO pgqueue.jobs (queue, name, payload) SELECT 'other', 'x', '{}' FROM generate_series(1, ${OTHER_JOBS})`,
      );
      const alone = claimLoop(url);
      await new Promise((r) => setTimeout(r, 5000));
      alone.stop = true;
      await alone.done;
      const a = [...alone.latencies].sort((x, y) => x - y);
      idle = { claims: a.length, claimMaxMs: a.at(-1) ?? 0, claimP99Ms: percentile(a, 99) };
      log(`[ops] claim loop alone for 5 s: max ${idle.claimMaxMs.toFixed(1)} ms, p99 ${idle.claimP99Ms.toFixed(1)} ms\n`);
      const wal = async () => (await client.query(`SELECT pg_catalog.pg_current_wal_lsn()::text AS l`)).rows[0].l;
      for (const op of OPS) {
        for (const how of ['lib', 'raw-1', 'raw-b']) {
          await client.query(`TRUNCATE pgqueue.jobs, pgqueue.job_history`);
          await client.query(
            `INSERT INTO pgqueue.jobs (queue, name, payload) SELECT 'other', 'x', '{}' FROM generate_series(1, ${OTHER_JOBS})`,
          );
          await client.query(op.seed, [jobs]);
          await client.query(`VACUUM ANALYZE pgqueue.jobs`);
          await client.query(`VACUUM ANALYZE pgqueue.job_history`);
          log(`[ops] ${op.name} / ${how} ... `);
          const loop = claimLoop(url);
          while (loop.latencies.length < 5) await new Promise((r) => setTimeout(r, 5));
          loop.latencies.length = 0;
          const w0 = await wal();
          const t0 = performance.now();
          let changed = 0;
          let most = 0;
          if (how === 'lib') {
            rows.max = 0;
            rows.statements = 0;
            rows.on = true;
            changed = await op.lib(queue);
            rows.on = false;
            most = rows.max;
          } else if (how === 'raw-1') {
            changed = (await client.query(op.raw1)).rowCount;
            most = changed;
          } else {
            for (;;) {
              const n = (await client.query(op.rawB)).rowCount;
              changed += n;
              most = Math.max(most, n);
              if (n === 0) break;
            }
          }
          const seconds = (performance.now() - t0) / 1000;
          const w1 = await wal();
          loop.stop = true;
          await loop.done;
          const lat = [...loop.latencies].sort((a, b) => a - b);
          const walBytes = Number(
            (await client.query(`SELECT pg_catalog.pg_wal_lsn_diff($1, $2)::bigint AS d`, [w1, w0])).rows[0].d,
          );
          const r = {
            op: op.name,
            how,
            changed,
            seconds,
            rowsPerSecond: changed / seconds,
            mostRowsPerStatement: most,
            walBytes,
            claims: lat.length,
            claimMaxMs: lat.at(-1) ?? 0,
            claimP99Ms: percentile(lat, 99),
          };
          results.push(r);
          log(`${changed} rows in ${seconds.toFixed(1)} s; claim max ${r.claimMaxMs.toFixed(1)} ms\n`);
          if (changed !== jobs) throw new Error(`${op.name} / ${how} changed ${changed} rows of ${jobs}`);
        }
      }
    } finally {
      await app.close();
    }
    return { results, idle };
  });
}

export function opsTable({ results, idle }) {
  const mb = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const lines = [
    '| call | how | rows | seconds | rows/s | most rows per statement | WAL | claim max / p99 (claims) |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.op} | ${r.how} | ${r.changed} | ${r.seconds.toFixed(1)} | ${Math.round(r.rowsPerSecond)} | ${r.mostRowsPerStatement} | ` +
        `${mb(r.walBytes)} | ${r.claimMaxMs.toFixed(1)} / ${r.claimP99Ms.toFixed(1)} ms (${r.claims}) |`,
    );
  }
  if (idle) {
    lines.push(
      `| claim loop alone (5 s) | | | | | | | ${idle.claimMaxMs.toFixed(1)} / ${idle.claimP99Ms.toFixed(1)} ms (${idle.claims}) |`,
    );
  }
  return lines.join('\n');
}

/** `node bench/ops.mjs [--ops-jobs=N] [--smoke]` */
export async function main(argv) {
  let jobs = 1_000_000;
  let smoke = false;
  for (const a of argv) {
    if (a === '--smoke') smoke = true;
    else if (a.startsWith('--ops-jobs=')) jobs = Number(a.slice(11));
    else if (a !== '--only=ops') throw new Error(`unknown argument ${a}; see the header of bench/ops.mjs`);
  }
  if (smoke) jobs = Math.min(jobs, 2000);
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error('--ops-jobs must be a whole number >= 1');
  const server = await startPostgres({ durable: !smoke });
  try {
    const started = Date.now();
    const measured = await opsBench({ url: server.url, jobs });
    const commit = (() => {
      try {
        return require('node:child_process')
          .execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root })
          .toString()
          .trim();
      } catch {
        return '?';
      }
    })();
    const text = `# Bulk calls at ${jobs} jobs (commit ${commit}, ${new Date(started).toISOString()}, ${((Date.now() - started) / 1000).toFixed(0)} s)\n\n${opsTable(measured)}\n`;
    process.stdout.write(text);
    const dir = path.join(here, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const base = smoke ? 'ops-smoke' : `ops-${jobs}`;
    fs.writeFileSync(path.join(dir, `${base}.md`), text);
    fs.writeFileSync(path.join(dir, `${base}.json`), JSON.stringify({ jobs, commit, ...measured }, null, 2));
    return 0;
  } finally {
    await server.stop();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
