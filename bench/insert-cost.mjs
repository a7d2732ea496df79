// What a bulk enqueue costs the server per job, and how much of it is the jobs table rather than
// the statement (issue 30: bulk enqueue at 0.84 x of the raw loop): microseconds per job, from
// one connection sending inserts of 1,000 jobs back to back, each variant on a schema migrated
// afresh, then the same insert with one piece of the table taken away, down to the loop's own
// statement on the loop's own 7-column table. Round by round, the variants interleaved; medians.
//
//   npm run build && node bench/insert-cost.mjs [--rounds=3] [--batches=30]
//
// INSERT_DIST=<a build's dist/> measures that build's insert instead (an A/B between commits).
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability, like bench/run.mjs. Not part of `npm run bench`; run it by hand.
// The variants drop indexes and constraints: never point it at a database you keep.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { numberArg, withScratchDatabase } from './scratch-database.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const dist = process.env.INSERT_DIST ?? path.join(here, '..', 'dist');
const { migrate } = require(path.join(dist, 'db', 'migrator'));
const { buildInsert, INSERT_COLUMNS } = require(path.join(dist, 'db', 'insert'));
const raw = require('./raw-sql.cjs');

const ROUNDS = numberArg('rounds', 3);
const BATCHES = numberArg('batches', 30);
const BATCH = 1000;
const SCHEMA = 'pgqueue';

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The partial indexes of jobs whose predicate a job added to wait is never in (no group, no unique key). */
const UNENTERED = [
  'jobs_active_idx',
  'jobs_group_claim_idx',
  'jobs_group_fifo_idx',
  'jobs_unique_key_idx',
  'jobs_waiting_children_idx',
];
const dropUnentered = UNENTERED.map((i) => `DROP INDEX ${SCHEMA}.${i}`);
const dropChecks = [
  `ALTER TABLE ${SCHEMA}.jobs DROP CONSTRAINT jobs_state_check`,
  `ALTER TABLE ${SCHEMA}.jobs DROP CONSTRAINT jobs_max_attempts_check`,
];

function variants() {
  // addBulk at its defaults: one queue, one name, every option the same, so every column but the
  // payload travels as one scalar (insert.ts); on the queue's pool, so durable.
  const ours = buildInsert(
    SCHEMA,
    INSERT_COLUMNS.map(() => false),
    true,
    'jsonb',
  );
  const oursParams = (payloads) => [
    JSON.stringify(payloads),
    'bench',
    'default',
    0,
    null,
    0,
    3,
    null,
    null,
    null,
    null,
    `${SCHEMA}_jobs`,
  ];
  const loopOnOurs = raw.insertMany.replace(
    `INTO ${raw.TABLE} (queue, payload) SELECT $1,`,
    `INTO ${SCHEMA}.jobs (queue, name, payload) SELECT $1, 'default',`,
  );
  const loopParams = (payloads) => ['bench', payloads.map((p) => JSON.stringify(p))];
  return [
    { key: 'insert', label: 'the library insert (addBulk of 1,000 at its defaults)', sql: ours, params: oursParams },
    { key: 'loop-stmt', label: "the loop's statement into the jobs table", sql: loopOnOurs, params: loopParams },
    {
      key: 'no-partial',
      label: `the library insert without the ${UNENTERED.length} partial indexes it never enters`,
      sql: ours,
      params: oursParams,
      setup: dropUnentered,
    },
    {
      key: 'no-checks',
      label: 'the same, and without the two CHECK constraints',
      sql: ours,
      params: oursParams,
      setup: [...dropUnentered, ...dropChecks],
    },
    {
      key: 'loop',
      label: "the loop's statement into the loop's table (7 columns)",
      sql: raw.insertMany,
      params: loopParams,
      loopTable: true,
    },
  ];
}

/** Microseconds per job of `v`, on a schema migrated afresh. */
async function measure(url, v) {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await c.query(`DROP TABLE IF EXISTS ${raw.TABLE}`);
    if (v.loopTable) await c.query(raw.schema);
    else await migrate(pool, SCHEMA);
    for (const s of v.setup ?? []) await c.query(s);
    await c.query('CHECKPOINT');
    const table = v.loopTable ? raw.TABLE : `${SCHEMA}.jobs`;
    let us = 0;
    for (let b = 0; b < BATCHES; b++) {
      const payloads = Array.from({ length: BATCH }, (_, i) => ({ i: b * BATCH + i, user: `u${i}` }));
      const values = v.params(payloads);
      const t0 = process.hrtime.bigint();
      await c.query({ name: v.key, text: v.sql, values });
      us += Number(process.hrtime.bigint() - t0) / 1000;
    }
    const [{ n }] = (await c.query(`SELECT count(*)::int AS n FROM ${table}`)).rows;
    if (n !== BATCH * BATCHES) throw new Error(`${v.key}: ${n} jobs stored of ${BATCH * BATCHES}`);
    return us / n;
  } finally {
    await c.end();
    await pool.end();
  }
}

async function run(url) {
  const vs = variants();
  const results = new Map(vs.map((v) => [v.key, []]));
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? vs : [...vs].reverse();
    for (const v of order) {
      const us = await measure(url, v);
      results.get(v.key).push(us);
      process.stderr.write(`[insert-cost] round ${r + 1}/${ROUNDS} ${v.key}: ${us.toFixed(2)} us/job\n`);
    }
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const version = (await admin.query('SHOW server_version')).rows[0].server_version;
  await admin.end();
  const base = median(results.get('insert'));
  console.log(
    `\nPostgreSQL ${version}; ${BATCHES} inserts of ${BATCH} jobs per variant, one connection, round trip included; ` +
      `${ROUNDS} rounds, medians (min-max)\n`,
  );
  console.log('| insert | us per job | against the library insert |');
  console.log('| --- | ---: | ---: |');
  for (const v of vs) {
    const xs = results.get(v.key);
    const m = median(xs);
    const delta = v.key === 'insert' ? '' : `${m - base >= 0 ? '+' : ''}${(m - base).toFixed(2)}`;
    console.log(`| ${v.label} | ${m.toFixed(2)} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}) | ${delta} |`);
  }
}

withScratchDatabase('bench_insert_cost', run).then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
