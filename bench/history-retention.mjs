// History that costs little: retention by partition drop against the batched DELETE, and getJob
// over a big partitioned history. `npm run bench:history` (or `npm run bench -- --only=retention`).
//
//   node bench/history-retention.mjs [--rows=10000000] [--days=30] [--reps=2000] [--drain] [--drain-reps=2] [--drain-jobs=200000]
//
// In its own fresh database (DATABASE_URL, which must allow CREATE DATABASE, or a throwaway
// embedded PostgreSQL with default durability), two schemas get the same `rows` finished jobs
// spread evenly over the last `days` days (1 % failed), generated with INSERT ... SELECT
// generate_series:
//   - `parts`: version 10, job_history partitioned by day (one partition per day, made with the
//     library's own HistoryPartitions, plus the ones it creates ahead, the failed partition and
//     the default: days + 5 tables, so 35 for 30 days);
//   - `flat`: version 9, the single job_history table as before.
// Then it removes the oldest day both ways and reports time, WAL bytes (pg_current_wal_lsn before
// and after) and the dead tuples left (pg_stat_user_tables), plus the VACUUM the batched DELETE
// leaves to do: the partition by HistoryPartitions.runOnce (DROP TABLE), the flat table by the
// retention statement of version 9 (DELETE ... WHERE id IN (SELECT ... LIMIT 1000)), bounded to
// the same day (its oldest rows would be older still), repeated until it deletes nothing, as the maintenance pass does a batch per pass. And getJob over each,
// against an empty partitioned history (where no id is found) and one holding only the jobs
// looked up (each found, like the big ones): p50/p95 of `reps` calls by random id through the
// library's JobStore, with each plan's buffers; and, not shipped, the same lookup naming the
// tables it reads instead of their parent (what the parent's 35 partitions cost a generic plan). `--drain` also runs the drain workload (200,000
// jobs, `--drain-jobs`) with an empty history and with `rows` in history, in fresh databases. Figures only: no
// assertion on time. Prints markdown; writes bench/results/history.json.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDatabase, dropDatabase, startPostgres } from '../scripts/pg-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const arg = (name, dflt) => {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? Number(a.split('=')[1]) : dflt;
};
const ROWS = arg('rows', 10_000_000);
const DAYS = arg('days', 30);
const REPS = arg('reps', 2000);
const DRAIN = process.argv.includes('--drain');
const DRAIN_REPS = arg('drain-reps', 2);
// As in bench/run.mjs: a drain long enough that a worker process's start-up CPU is a small part.
const DRAIN_JOBS = arg('drain-jobs', 200_000);
const D = 86_400_000;

const { applyMigration, loadMigrations, migrate } = require('../dist/db/migrator.js');
const { clientExecutor, poolExecutor } = require('../dist/db/executor.js');
const { HistoryPartitions } = require('../dist/db/history/partitions.js');
const { JobStore } = require('../dist/db/job-store.js');
const { HistoryLayoutCache } = require('../dist/db/history/by-id.js');
const { readStatements } = require('../dist/db/reads.js');

const log = (m) => process.stderr.write(`[history] ${m}\n`);
const secs = (ms) => (ms / 1000).toFixed(2);

async function fill(pool, schema, rows, nowMs) {
  // Evenly over [now - DAYS, now): row g finishes at now - (rows - g) * step. Ids 1..rows.
  const chunk = 1_000_000;
  for (let from = 1; from <= rows; from += chunk) {
    const to = Math.min(rows, from + chunk - 1);
    await pool.query(
      `INSERT INTO ${schema}.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, result, created_at, started_at, finished_at, locked_by)
       SELECT g, 'bench', 'noop', jsonb_build_object('i', g), CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'completed' END, 0,
              t, 1, 3, '[]', NULL, t, t, t, 'bench-node'
       FROM generate_series($1::bigint, $2::bigint) g,
            LATERAL (SELECT to_timestamp($4 / 1000.0) - ($3::bigint - g) * ($5::float8 / $3) * interval '1 millisecond') x(t)`,
      [from, to, rows, nowMs, DAYS * D],
    );
    log(`${schema}: ${to.toLocaleString('en')} rows`);
  }
  await pool.query(`VACUUM ANALYZE ${schema}.job_history`);
}

async function wal(pool) {
  return (await pool.query('SELECT pg_current_wal_lsn() AS l')).rows[0].l;
}
async function walSince(pool, lsn) {
  return Number((await pool.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS b', [lsn])).rows[0].b);
}
/** Dead tuples of the schema's history tables, once the statistics caught up. */
async function deadTuples(pool, schema) {
  await pool.query(`SELECT pg_stat_force_next_flush()`).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1500));
  const { rows } = await pool.query(
    `SELECT coalesce(sum(n_dead_tup), 0)::bigint AS d FROM pg_stat_user_tables WHERE schemaname = $1 AND relname LIKE 'job_history%'`,
    [schema],
  );
  return Number(rows[0].d);
}

/** The ids getJob looks up: REPS of 1..maxId, spread over the whole range. */
function lookupIds(maxId) {
  return Array.from({ length: REPS }, (_, i) => String(1 + ((i * 7919 + 13) % Math.max(1, maxId))));
}

/**
 * For the 'named' variant of getJobTimes: a function of (the flat getJob statement, id) that
 * answers it with `FROM job_history WHERE id = $1` replaced by a UNION ALL of the leaves that can
 * hold the id, from the catalog and job_history_id_bounds as they are now.
 */
async function namedLeaves(pool, schema) {
  const { rows } = await pool.query(
    `SELECT c.relname AS name, b.partition IS NOT NULL AS closed, b.min_id::text AS lo, b.max_id::text AS hi
     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     LEFT JOIN ${schema}.job_history_id_bounds b ON b.partition = c.relname
     WHERE i.inhparent = $1::regclass`,
    [`${schema}.job_history_done`],
  );
  return (flatSql, id) => {
    const n = BigInt(id);
    const names = [
      'job_history_failed',
      ...rows.filter((r) => !r.closed || (r.lo !== null && BigInt(r.lo) <= n && n <= BigInt(r.hi))).map((r) => r.name),
    ];
    const s = pg.escapeIdentifier(schema);
    const union = names.map((t) => `SELECT * FROM ${s}.${pg.escapeIdentifier(t)} WHERE id = $1`).join(' UNION ALL ');
    const from = `FROM ${s}.job_history WHERE id = $1`;
    if (!flatSql.includes(from)) throw new Error(`the flat getJob statement no longer reads ${from}`);
    return flatSql.replace(from, `FROM (${union}) h`);
  };
}

/**
 * getJob through the library's JobStore. `mode`:
 *   'shipped'  the library's getJob;
 *   'every'    the statement of version 10, which probes the id index of every partition (what
 *              getJob ran before the id ranges of migration 11);
 *   'named'    not shipped, measured to show what the 35 tables cost: the same lookup naming the
 *              leaf tables it reads (failed, default, the open partitions and the closed ones whose
 *              id range holds the id) instead of the parent job_history_done, whose generic plan
 *              takes a lock on every one of its partitions at each call. One prepared statement per
 *              set of names: a new set every day on every connection, which node-postgres never frees.
 * The variants are prepared the same way and followed by the same flow read, for a like-for-like
 * comparison in one run.
 */
async function getJobTimes(pool, schema, maxId, mode = 'shipped') {
  log(`getJob: ${schema}, ${mode}`);
  const store = new JobStore(pool, {
    schema,
    retention: { completedMs: D, cancelledMs: D, failedMs: null },
    asyncCommit: true,
    preparedStatements: true,
  });
  const layout = (await pool.query(`SELECT to_regclass($1) IS NOT NULL AS p`, [`${schema}.job_history_current`])).rows[0].p
    ? 'partitioned'
    : 'flat';
  const cache = new HistoryLayoutCache(poolExecutor(pool), schema);
  const rq = readStatements(schema);
  const named = mode === 'named' ? await namedLeaves(pool, schema) : null;
  const lookup = async (id) =>
    mode === 'every'
      ? { sql: rq.getJob, values: [id] }
      : mode === 'named'
        ? { sql: named(rq.getJobIn.flat, id), values: [id] }
        : layout === 'flat'
          ? { sql: rq.getJobIn.flat, values: [id] }
          : cache.lookup(rq.getJobIn, id);
  const ids = lookupIds(maxId);
  const ms = [];
  let found = 0;
  const c = mode === 'shipped' ? null : await pool.connect();
  try {
    const statements = new Map();
    const get =
      mode === 'shipped'
        ? (id) => store.getJob(id)
        : async (id) => {
            const { sql: text, values } = await lookup(id);
            if (!statements.has(text)) statements.set(text, `${mode}_${statements.size}`);
            const { rows } = await c.query({ name: statements.get(text), text, values });
            await store.flows.flowOf(id);
            return rows[0] ?? null;
          };
    for (const id of ids.slice(0, 50)) await get(id);
    if (mode === 'named') {
      // Each set of names is a statement of its own: each prepared and past its first five
      // (custom-plan) runs before the measured calls, as on a connection that has run for a while.
      const first = new Map();
      for (const id of ids) first.set((await lookup(id)).sql, id);
      for (const id of first.values()) for (let k = 0; k < 6; k++) await get(id);
    }
    for (const id of ids) {
      const s = performance.now();
      if (await get(id)) found++;
      ms.push(performance.now() - s);
    }
  } finally {
    c?.release();
  }
  ms.sort((a, b) => a - b);
  // Buffers: the median over 20 of the ids (generic plans, as the prepared statement runs).
  const buffers = (n) => (n['Shared Hit Blocks'] ?? 0) + (n['Shared Read Blocks'] ?? 0);
  const e = await pool.connect();
  const perId = [];
  let p;
  try {
    await e.query(`SET plan_cache_mode = force_generic_plan`);
    const literal = (v) =>
      v === null
        ? 'NULL'
        : v instanceof Date
          ? `'${v.toISOString()}'`
          : typeof v === 'string' && !/^\d+$/.test(v)
            ? `'${v}'`
            : String(Number(v));
    for (const id of ids.slice(0, 20)) {
      const { sql: text, values } = await lookup(id);
      await e.query(`PREPARE lookup AS ${text}`);
      const plan = await e.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE lookup(${values.map(literal).join(', ')})`);
      p = plan.rows[0]['QUERY PLAN'][0];
      perId.push(buffers(p.Plan));
      await e.query('DEALLOCATE lookup');
    }
    await e.query('RESET plan_cache_mode');
  } finally {
    e.release();
  }
  perId.sort((a, b) => a - b);
  const first = await lookup(ids[0]);
  const planned = await pool.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${first.sql}`, first.values);
  p = planned.rows[0]['QUERY PLAN'][0];
  const leaves = Number(
    (await pool.query(`SELECT count(*)::int AS n FROM pg_partition_tree($1::regclass) WHERE isleaf`, [`${schema}.job_history`]))
      .rows[0].n,
  );
  return {
    p50: ms[Math.floor(ms.length / 2)],
    p95: ms[Math.floor(ms.length * 0.95)],
    found,
    buffers: perId[Math.floor(perId.length / 2)],
    planningMs: p['Planning Time'],
    leaves: leaves || 1,
  };
}

async function main() {
  const server = await startPostgres({ durable: true });
  const name = `bench_history_${process.pid}`;
  const results = { rows: ROWS, days: DAYS, reps: REPS, startedAt: new Date().toISOString() };
  try {
    const url = await createDatabase(server.url, name);
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    try {
      const nowMs = Number((await pool.query(`SELECT extract(epoch FROM now())::float8 * 1000 AS n`)).rows[0].n);
      results.server = (await pool.query(`SELECT current_setting('server_version') AS v`)).rows[0].v;
      await migrate(pool, 'parts');
      await migrate(pool, 'empty');
      const parts = new HistoryPartitions(pool, 'parts', D);
      for (let k = DAYS; k >= 0; k--) await parts.runOnce(1000 * 365 * D, nowMs - k * D);
      await new HistoryPartitions(pool, 'empty', D).runOnce(D);
      // Like for like with the big history, whose lookups find their job: a history that holds
      // only the jobs getJob looks up, finished just now (same ids, same plan, a row to return).
      await migrate(pool, 'small');
      await new HistoryPartitions(pool, 'small', D).runOnce(D);
      const c = await pool.connect();
      await c.query('BEGIN');
      for (const m of loadMigrations().filter((x) => x.version < 10)) await applyMigration(clientExecutor(c), 'flat', m);
      await c.query('COMMIT');
      c.release();

      let t = Date.now();
      await fill(pool, 'parts', ROWS, nowMs);
      results.fillPartsS = (Date.now() - t) / 1000;
      t = Date.now();
      await fill(pool, 'flat', ROWS, nowMs);
      results.fillFlatS = (Date.now() - t) / 1000;
      await pool.query(
        `INSERT INTO small.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts, errors, result, created_at, started_at, finished_at, locked_by)
         SELECT DISTINCT g, 'bench', 'noop', jsonb_build_object('i', g), 'completed', 0, now(), 1, 3, '[]'::jsonb, NULL::jsonb, now(), now(), now(), 'bench-node'
         FROM unnest($1::bigint[]) g`,
        [lookupIds(ROWS)],
      );
      await pool.query(`VACUUM ANALYZE small.job_history`);
      // The id range of every partition whose day is over (the maintenance pass does this once
      // an hour past each day's end; here after the fill, which wrote into past days).
      results.closed = (await parts.recordIdBounds()).length;
      await pool.query('CHECKPOINT');

      results.getJob = {
        empty: await getJobTimes(pool, 'empty', ROWS),
        small: await getJobTimes(pool, 'small', ROWS),
        parts: await getJobTimes(pool, 'parts', ROWS),
        partsEvery: await getJobTimes(pool, 'parts', ROWS, 'every'),
        partsNamed: await getJobTimes(pool, 'parts', ROWS, 'named'),
        flat: await getJobTimes(pool, 'flat', ROWS),
      };

      // The oldest whole day: its partition, and the same rows in the flat table.
      const { list } = await parts.partitions();
      const oldest = list.find((p) => p.lo >= nowMs - DAYS * D) ?? list[0];
      const count = async (schema) =>
        Number(
          (
            await pool.query(
              `SELECT count(*)::bigint AS n FROM ${schema}.job_history WHERE state <> 'failed' AND finished_at >= to_timestamp($1 / 1000.0) AND finished_at < to_timestamp($2 / 1000.0)`,
              [oldest.lo, oldest.hi],
            )
          ).rows[0].n,
        );
      results.day = { partition: oldest.name, rows: await count('parts'), flatRows: await count('flat') };
      await pool.query('CHECKPOINT');

      const deadBefore = await deadTuples(pool, 'parts');
      let lsn = await wal(pool);
      t = performance.now();
      const dropped = await parts.runOnce(nowMs - oldest.hi, nowMs);
      const dropMs = performance.now() - t;
      results.drop = {
        ms: dropMs,
        dropped: dropped.dropped,
        walBytes: await walSince(pool, lsn),
        deadTuples: (await deadTuples(pool, 'parts')) - deadBefore,
      };
      log(`drop: ${secs(dropMs)} s, ${results.drop.walBytes} WAL bytes`);
      await pool.query('CHECKPOINT');

      // Version 9's retention statement, a batch of 1,000 per statement, until none is left.
      const prune = `
        DELETE FROM flat.job_history WHERE id IN (
          SELECT id FROM flat.job_history
          WHERE state IN ('completed', 'cancelled') AND finished_at < to_timestamp($1 / 1000.0)
            AND finished_at >= to_timestamp($2 / 1000.0)
          LIMIT 1000)`;
      const flatDeadBefore = await deadTuples(pool, 'flat');
      lsn = await wal(pool);
      t = performance.now();
      let deleted = 0;
      let statements = 0;
      for (;;) {
        const r = await pool.query(prune, [oldest.hi, oldest.lo]);
        statements++;
        deleted += r.rowCount;
        if (r.rowCount === 0) break;
      }
      const deleteMs = performance.now() - t;
      results.delete = {
        ms: deleteMs,
        deleted,
        statements,
        walBytes: await walSince(pool, lsn),
        deadTuples: (await deadTuples(pool, 'flat')) - flatDeadBefore,
      };
      log(`batched delete: ${deleted} rows in ${secs(deleteMs)} s`);
      lsn = await wal(pool);
      t = performance.now();
      await pool.query('VACUUM flat.job_history');
      results.vacuum = { ms: performance.now() - t, walBytes: await walSince(pool, lsn) };
    } finally {
      await pool.end();
    }
    if (DRAIN) results.drain = await drains(server.url);
  } finally {
    await dropDatabase(server.url, name).catch(() => undefined);
    await server.stop();
  }
  print(results);
  fs.mkdirSync(path.join(here, 'results'), { recursive: true });
  fs.writeFileSync(path.join(here, 'results', 'history.json'), JSON.stringify(results, null, 2));
}

/** The drain workload (bench/workloads.mjs) with an empty history and with ROWS in it, interleaved. */
async function drains(adminUrl) {
  const { drain } = await import('./workloads.mjs');
  const pkg = require('../dist');
  const ctx = (dbName) => ({ adminUrl, dbName, libOptions: {}, rawBatch: undefined, pkg, pgss: false, bouncer: null });
  const out = { empty: [], full: [], cpu: { empty: [], full: [] } };
  for (let rep = 0; rep < DRAIN_REPS; rep++) {
    for (const history of rep % 2 ? [ROWS, 0] : [0, ROWS]) {
      const r = await drain(ctx(`bench_history_drain_${history}`), { kind: 'lib', processes: 1, jobs: DRAIN_JOBS, history });
      if (!r.check.ok) throw new Error(`drain with ${history} in history: ${r.check.detail}`);
      (history ? out.full : out.empty).push(r.metrics.rate);
      (history ? out.cpu.full : out.cpu.empty).push(r.metrics.cpuMsPerJob);
      log(
        `drain, ${history} in history: ${Math.round(r.metrics.rate)} jobs/s, ${r.metrics.cpuMsPerJob?.toFixed(4)} ms CPU per job`,
      );
    }
  }
  return out;
}

function print(r) {
  const mb = (b) => `${(b / 1_048_576).toFixed(1)} MB`;
  const lines = [
    `# History retention and getJob (${r.rows.toLocaleString('en')} rows over ${r.days} days; PostgreSQL ${r.server})`,
    '',
    `Removing the oldest day (${r.day.rows.toLocaleString('en')} completed jobs; ${r.day.partition}):`,
    '',
    '| | partition drop | batched DELETE (1,000 per statement) |',
    '| --- | --- | --- |',
    `| time | ${secs(r.drop.ms)} s | ${secs(r.delete.ms)} s (${r.delete.statements} statements) |`,
    `| WAL | ${mb(r.drop.walBytes)} | ${mb(r.delete.walBytes)} |`,
    `| dead tuples left | ${r.drop.deadTuples} | ${r.delete.deadTuples.toLocaleString('en')} |`,
    `| VACUUM it leaves | none | ${secs(r.vacuum.ms)} s, ${mb(r.vacuum.walBytes)} WAL |`,
    '',
    `getJob by id (${r.reps} calls, random ids; buffers: median over 20 ids of the generic plan's EXPLAIN ANALYZE; planning of one unprepared run; ${r.closed} partitions closed with their id range recorded):`,
    '',
    '| history | tables | found | p50 ms | p95 ms | buffers | planning ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...[
      ['empty, partitioned (no id found)', r.getJob.empty],
      [`only the ${r.getJob.small.found.toLocaleString('en')} jobs looked up, partitioned (each found)`, r.getJob.small],
      [`${r.rows.toLocaleString('en')} rows, partitioned by day, closed partitions by id range`, r.getJob.parts],
      [`${r.rows.toLocaleString('en')} rows, partitioned by day, every partition probed (version 10)`, r.getJob.partsEvery],
      [
        `${r.rows.toLocaleString('en')} rows, the tables read named in the statement (not shipped: a prepared statement per set of names)`,
        r.getJob.partsNamed,
      ],
      [`${r.rows.toLocaleString('en')} rows, one table (version 9)`, r.getJob.flat],
    ].map(
      ([label, g]) =>
        `| ${label} | ${g.leaves} | ${g.found} | ${g.p50.toFixed(3)} | ${g.p95.toFixed(3)} | ${g.buffers} | ${g.planningMs.toFixed(3)} |`,
    ),
    '',
    `Fill: ${r.fillPartsS.toFixed(0)} s partitioned, ${r.fillFlatS.toFixed(0)} s one table.`,
  ];
  if (r.drain) {
    const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
    lines.push(
      '',
      `Drain of ${DRAIN_JOBS.toLocaleString('en')} jobs, 1 process: ${Math.round(med(r.drain.empty))} jobs/s with an empty history, ` +
        `${Math.round(med(r.drain.full))} jobs/s with ${r.rows.toLocaleString('en')} in history ` +
        `(runs: ${r.drain.empty.map(Math.round).join(', ')} / ${r.drain.full.map(Math.round).join(', ')}); ` +
        `CPU per job (worker and backends) ${med(r.drain.cpu.empty)?.toFixed(4)} / ${med(r.drain.cpu.full)?.toFixed(4)} ms.`,
    );
  }
  console.log(lines.join('\n'));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err.stack ?? err);
    process.exit(1);
  },
);
