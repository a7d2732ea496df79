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
import { distRequire, interleavedRounds, numberArg, printVariants, runScratch, withSession } from './scratch-database.mjs';

const lib = distRequire('INSERT_DIST');
const { migrate } = lib('db/migrator');
const { buildInsert, INSERT_COLUMNS } = lib('db/insert');
const raw = createRequire(import.meta.url)('./raw-sql.cjs');

const ROUNDS = numberArg('rounds', 3);
const BATCHES = numberArg('batches', 30);
const BATCH = 1000;
const SCHEMA = 'pgqueue';

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

/** The claim index as the loop has it: what ordering by priority first costs each insert. */
const claimIndexWithoutPriority = [
  `DROP INDEX ${SCHEMA}.jobs_claim_idx`,
  `CREATE INDEX jobs_claim_idx ON ${SCHEMA}.jobs (queue, run_at, id) WHERE state = 'waiting'`,
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
      key: 'no-priority',
      label: "the same, and the claim index without priority (the loop's: queue, run_at, id)",
      sql: ours,
      params: oursParams,
      setup: [...dropUnentered, ...dropChecks, ...claimIndexWithoutPriority],
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
  return withSession(url, async (c, pool) => {
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
  });
}

async function run(url) {
  const vs = variants();
  const { results, version } = await interleavedRounds('insert-cost', url, vs, measure, ROUNDS);
  console.log(
    `\nPostgreSQL ${version}; ${BATCHES} inserts of ${BATCH} jobs per variant, one connection, round trip included; ` +
      `${ROUNDS} rounds, medians (min-max)\n`,
  );
  printVariants(['insert', 'us per job', 'against the library insert'], vs, results, () => 'insert');
}

runScratch('bench_insert_cost', run);
