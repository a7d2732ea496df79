// What one claim costs while an old snapshot holds the xmin horizon back: CPU-independent figures
// (shared buffers hit, index entries and heap tuples visited) from EXPLAIN (ANALYZE, BUFFERS) of
// the library's own claim statement, after N jobs have flowed through claim + complete, with
// and without a REPEATABLE READ transaction left open for the whole flow (issue 13, part 4).
//
//   npm run build && DATABASE_URL=postgres://... node bench/held-xmin.mjs [--jobs=20000] [--live=10] [--window=1000]
//
// Each case runs in a fresh database. The flow: insert 50 jobs, claim them 32 at a time, complete
// each batch (the history write included), until --jobs have gone through; then --live jobs are
// left waiting and the claim is explained (inside a transaction that is rolled back) twice:
// `claim` (the first claim after the flow), then again (`claim, 2nd`, after the first one's
// index scan had its chance to mark dead entries); the same for `claimSince` (the claim within a
// window, lib/worker/claim-window.ts) reaching --window ms back. This flow runs thousands of jobs
// a second, so a window of 150 ms here holds about as many dead entries as the worker's 5 s
// margin at 800 jobs/s. Prints a markdown table.

import { createRequire } from 'node:module';
import pg from 'pg';

const require = createRequire(import.meta.url);
const { schemaSql } = require('../dist/db/store-context.js');
const { claimStatements } = require('../dist/db/claim.js');
const { migrate } = require('../dist/db/migrator.js');

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, '').split('=');
    return [k, v ?? 'true'];
  }),
);
const JOBS = Number(args.jobs ?? 20_000);
const LIVE = Number(args.live ?? 10);
const WINDOW = Number(args.window ?? 1000);
const base = process.env.DATABASE_URL;
if (!base) throw new Error('set DATABASE_URL to a server where this role may CREATE DATABASE');
const SCHEMA = 'pgqueue';
const q = claimStatements(schemaSql(SCHEMA));
const WORKER = 'bench:held-xmin';

function dbUrl(name) {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

async function insert(c, n) {
  await c.query(
    `INSERT INTO ${SCHEMA}.jobs (queue, name, payload) SELECT 'q', 'noop', jsonb_build_object('i', g) FROM generate_series(1, $1) g`,
    [n],
  );
}

/** Claims and completes until the queue is empty; returns the jobs it finished. */
async function flowOnce(c) {
  let done = 0;
  for (;;) {
    const { rows } = await c.query(q.claim, ['q', 32, WORKER, 60_000]);
    if (!rows.length) return done;
    await c.query(q.completeArchive, [rows.map((r) => r.id), rows.map((r) => r.attempt), rows.map(() => 'null'), WORKER]);
    done += rows.length;
  }
}

/** The claim's plan figures: buffers hit by the whole statement and rows its index scan removed. */
async function explainClaim(c, sql, params) {
  await c.query('BEGIN');
  try {
    const { rows } = await c.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`, params);
    const plan = rows[0]['QUERY PLAN'][0];
    const nodes = [];
    const walk = (n) => {
      nodes.push(n);
      for (const k of n.Plans ?? []) walk(k);
    };
    walk(plan.Plan);
    const scan = nodes.find((n) => n['Index Name'] === 'jobs_claim_idx');
    return {
      ms: plan['Execution Time'],
      hit: plan.Plan['Shared Hit Blocks'] + (plan.Plan['Shared Read Blocks'] ?? 0),
      scanHit: scan ? scan['Shared Hit Blocks'] + scan['Shared Read Blocks'] : null,
      claimed: plan.Plan['Actual Rows'],
      scanRows: scan?.['Actual Rows'],
    };
  } finally {
    await c.query('ROLLBACK');
  }
}

async function runCase(held, variants) {
  const name = `bench_held_xmin_${held ? 'held' : 'free'}_${process.pid}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  const pool = new pg.Pool({ connectionString: dbUrl(name), max: 2 });
  const holder = new pg.Client({ connectionString: dbUrl(name) });
  pool.on('error', () => undefined);
  holder.on('error', () => undefined);
  try {
    await migrate(pool, SCHEMA);
    await holder.connect();
    if (held) {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query(`SELECT count(*) FROM ${SCHEMA}.jobs`);
    }
    const c = await pool.connect();
    let flowed = 0;
    while (flowed < JOBS) {
      await insert(c, 50);
      flowed += await flowOnce(c);
    }
    await insert(c, LIVE);
    const out = [];
    for (const [label, sql, params] of variants) {
      out.push({ label, ...(await explainClaim(c, sql, params)) });
      out.push({ label: `${label}, 2nd`, ...(await explainClaim(c, sql, params)) });
    }
    const {
      rows: [st],
    } = await c.query(
      `SELECT n_dead_tup::int AS dead, pg_relation_size('${SCHEMA}.jobs_claim_idx') / 8192 AS idx_pages FROM pg_stat_user_tables WHERE relid = '${SCHEMA}.jobs'::regclass`,
    );
    c.release();
    return { held, flowed, out, st };
  } finally {
    await holder.end().catch(() => undefined);
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const claimParams = ['q', 32, WORKER, 60_000];
const variants = [['claim', q.claim, claimParams]];
// claimSince as the worker sends it within the window: from priority 0, --window ms back.
variants.push([`claimSince, window ${WINDOW} ms`, q.claimSince, [...claimParams, 0, WINDOW]]);

console.log(`${JOBS} jobs flowed (insert 50, claim 32, complete), then ${LIVE} waiting; PostgreSQL at ${new URL(base).host}`);
console.log(
  '| horizon | statement | shared buffers hit (statement / claim index scan) | jobs claimed | ms (noisy: shared machine) |',
);
console.log('| --- | --- | ---: | ---: | ---: |');
for (const held of [false, true]) {
  const r = await runCase(held, variants);
  for (const o of r.out) {
    console.log(
      `| ${held ? 'held by an open REPEATABLE READ' : 'free'} | ${o.label} | ${o.hit} / ${o.scanHit} | ${o.claimed} | ${o.ms.toFixed(2)} |`,
    );
  }
  console.log(`|  | (n_dead_tup ${r.st.dead}, claim index ${r.st.idx_pages} pages) | | | |`);
}
