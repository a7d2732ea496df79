// What one job costs the server at the two statements a drain repeats, the claim and the
// completion (issue 30: where the burst's gap to the raw loop goes): microseconds per job, from
// one connection sending batches of 300 back to back, each variant on a schema migrated afresh
// with its jobs preloaded, then the same statement with one piece taken away. The difference
// is what that piece costs. Round by round, the variants interleaved; medians printed.
//
//   npm run build && node bench/outcome-cost.mjs [--rounds=3] [--batches=100]
//
// OUTCOME_DIST=<a build's dist/> measures that build's statements instead (an A/B of the claim or
// completion between two commits, each run on its own build).
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability, like bench/run.mjs. Not part of `npm run bench`; run it by hand.
// The variants drop indexes and change statements: never point it at a database you keep.

import { distRequire, interleavedRounds, numberArg, printVariants, runScratch, withSession } from './scratch-database.mjs';

const lib = distRequire('OUTCOME_DIST');
const { migrate } = lib('db/migrator');
const { claimStatements } = lib('db/claim');
const { completionStatements } = lib('db/outcomes');
const { schemaSql } = lib('db/store-context');
const { HistoryPartitions } = lib('db/history/partitions');

const ROUNDS = numberArg('rounds', 3);
const BATCHES = numberArg('batches', 100);
const BATCH = 300;
const SCHEMA = 'pgqueue';

/** Drops every index of the history's leaf partitions whose name ends with `suffix`. */
const dropLeafIndexes = (suffix) => `
  DO $$DECLARE r record; BEGIN
    FOR r IN SELECT c.oid::regclass AS i FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = '${SCHEMA}' AND c.relkind = 'i' AND c.relname LIKE 'job\\_history\\_p%${suffix}'
    LOOP EXECUTE 'DROP INDEX ' || r.i; END LOOP; END$$`;

function variants() {
  const on = schemaSql(SCHEMA, true, true);
  const claim = claimStatements(on).claim;
  const returning = claim.slice(claim.indexOf('RETURNING'));
  const complete = completionStatements(on);
  const quiet = completionStatements(schemaSql(SCHEMA, true, false));
  return [
    // The claim: $1 queue $2 limit $3 worker $4 lease ms.
    { key: 'claim', label: 'claim, as the worker sends it', kind: 'claim', sql: claim },
    {
      key: 'claim-2',
      label: 'claim returning id and payload only',
      kind: 'claim',
      sql: claim.replace(returning, 'RETURNING j.id, j.payload'),
    },
    {
      key: 'claim-active',
      label: 'claim without jobs_active_idx',
      kind: 'claim',
      sql: claim,
      setup: [`DROP INDEX ${SCHEMA}.jobs_active_idx`],
    },
    {
      key: 'claim-paused',
      label: 'claim without the paused check',
      kind: 'claim',
      sql: claim.replace(/AND NOT EXISTS \(SELECT 1 FROM "pgqueue"\.queues WHERE name = \$1 AND paused\)/, ''),
    },
    // The completion: $1 id[] $2 attempt $3 results $4 worker $5 attempts by id.
    {
      key: 'complete',
      label: 'completion into history, events on (the default)',
      kind: 'complete',
      sql: complete.completeArchive,
    },
    { key: 'complete-quiet', label: 'the same, events off', kind: 'complete', sql: quiet.completeArchive },
    { key: 'delete', label: 'deleted, no history (retention.completedMs: 0)', kind: 'delete', sql: complete.completeDelete },
    {
      key: 'complete-qsi',
      label: 'into history without its (queue, state, id) index',
      kind: 'complete',
      sql: complete.completeArchive,
      setup: [`DROP INDEX ${SCHEMA}.job_history_queue_state_idx`],
    },
    {
      key: 'complete-qi',
      label: 'into history with (queue, id) in place of (queue, state, id)',
      kind: 'complete',
      sql: complete.completeArchive,
      setup: [`DROP INDEX ${SCHEMA}.job_history_queue_state_idx`, `CREATE INDEX ON ${SCHEMA}.job_history (queue, id)`],
    },
    {
      key: 'complete-id',
      label: 'into history without its id index',
      kind: 'complete',
      sql: complete.completeArchive,
      setup: [dropLeafIndexes('t0000\\_id\\_idx')],
    },
    {
      key: 'complete-brin',
      label: 'into history without its finished_at BRIN',
      kind: 'complete',
      sql: complete.completeArchive,
      setup: [dropLeafIndexes('\\_finished\\_idx')],
    },
  ];
}

/** Microseconds per job of `v`, on a schema migrated afresh and preloaded with BATCH * BATCHES jobs. */
async function measure(url, v) {
  return withSession(url, async (c, pool) => {
    await c.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await migrate(pool, SCHEMA);
    // The dated history partitions a worker node's maintenance creates (one a day, ahead of time):
    // completions land in today's, with its indexes, as in an app.
    await new HistoryPartitions(pool, SCHEMA, 86_400_000).ensureAhead();
    const claimed = v.kind !== 'claim';
    await c.query(
      `INSERT INTO ${SCHEMA}.jobs (queue, name, payload${claimed ? ', state, attempt, locked_by, started_at, locked_until' : ''})
       SELECT 'bench', 'default', pg_catalog.jsonb_build_object('i', g)${claimed ? ", 'active', 1, 'w', now(), now() + interval '1 hour'" : ''}
       FROM pg_catalog.generate_series(1, $1::int) AS g`,
      [BATCH * BATCHES],
    );
    for (const s of v.setup ?? []) await c.query(s);
    await c.query(`VACUUM ANALYZE ${SCHEMA}.jobs`);
    await c.query('CHECKPOINT');
    const [{ first }] = (await c.query(`SELECT pg_catalog.min(id)::bigint AS first FROM ${SCHEMA}.jobs`)).rows;
    let jobs = 0;
    const t0 = process.hrtime.bigint();
    for (let b = 0; b < BATCHES; b++) {
      if (v.kind === 'claim') {
        const r = await c.query({ name: v.key, text: v.sql, values: ['bench', BATCH, 'w', 30_000], rowMode: 'array' });
        jobs += r.rows.length;
      } else {
        const ids = `{${Array.from({ length: BATCH }, (_, i) => Number(first) + b * BATCH + i).join(',')}}`;
        const values = v.kind === 'delete' ? [ids, 1, 'w', null] : [ids, 1, null, 'w', null];
        const [r] = (await c.query({ name: v.key, text: v.sql, values })).rows;
        jobs += r.n;
      }
    }
    const us = Number(process.hrtime.bigint() - t0) / 1000 / jobs;
    if (v.kind !== 'claim') {
      const [{ n }] = (await c.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.job_history_done_default`)).rows;
      if (n !== 0) throw new Error(`${v.key}: ${n} jobs landed in the default history partition, not a dated one`);
    }
    if (jobs !== BATCH * BATCHES) throw new Error(`${v.key}: ${jobs} jobs of ${BATCH * BATCHES}`);
    return us;
  });
}

async function run(url) {
  const vs = variants();
  const { results, version } = await interleavedRounds('outcome-cost', url, vs, measure, ROUNDS);
  console.log(
    `\nPostgreSQL ${version}; ${BATCHES} batches of ${BATCH} jobs per variant, one connection; ${ROUNDS} rounds, medians (min-max)\n`,
  );
  printVariants(['statement', 'us per job', 'against the first of its kind'], vs, results, (v) =>
    v.kind === 'claim' ? 'claim' : 'complete',
  );
}

runScratch('bench_outcome_cost', run);
