// Where a bulk enqueue's time goes, in figures that load moves little (not part of `npm run bench`):
//
//   npm run build && DATABASE_URL=postgres://... node bench/bulk-insert.mjs [--reps=41] [--calls=100]
//
// In a fresh database (dropped at the end) with the library's schema and the raw reference's table:
// 1. The server: EXPLAIN (ANALYZE, TIMING OFF) execution time of one 1,000-row insert, median of
//    `reps` runs each, interleaved, each rolled back: the raw reference's own statement
//    (bench/raw-sql.cjs insertMany); the library's statement shape (one jsonb array of payloads)
//    into the raw table, into the raw table with our 4-column claim index, and into a copy of our
//    jobs table (same columns, defaults, checks and indexes); and the library's own statement.
// 2. The producer: CPU (user + system of this process) per 1,000 jobs of `calls` addBulk(1,000)
//    calls through the library's Queue and JobStore on a pool, against `calls` of the raw
//    insertMany, 5 interleaved rounds, medians; each commit asynchronous (synchronous_commit off
//    for the session, and the library's statement run in a caller's transaction so it does not
//    force it on), so no round waits for a WAL flush.
// Prints markdown. Figures only; nothing asserts a time.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.resolve(here, '..', 'dist');
const { migrate } = require(path.join(dist, 'db/migrator'));
const { JobStore } = require(path.join(dist, 'db/job-store'));
const { buildInsert } = require(path.join(dist, 'db/insert'));
const { Queue } = require(path.join(dist, 'producer/queue'));
const { resolveJobDefaults } = require(path.join(dist, 'core/options/job-checks'));
const { DEFAULTS } = require(path.join(dist, 'core/options/defaults'));
const raw = require('./raw-sql.cjs');

const arg = (name, dflt) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt);
const REPS = arg('reps', 41);
const CALLS = arg('calls', 100);
const admin = process.env.DATABASE_URL;
if (!admin) throw new Error('bench/bulk-insert.mjs needs DATABASE_URL (a server where it may CREATE DATABASE)');

const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1];
const payloads = (base) => Array.from({ length: 1000 }, (_, k) => JSON.stringify({ i: base + k }));

async function main() {
  const name = `bulk_insert_${process.pid}`;
  const a = new pg.Client({ connectionString: admin });
  await a.connect();
  await a.query(`CREATE DATABASE ${name}`);
  const u = new URL(admin);
  u.pathname = `/${name}`;
  const url = u.toString();
  try {
    const pool = new pg.Pool({ connectionString: url, max: 4, options: '-c synchronous_commit=off' });
    // The DROP ... WITH (FORCE) at the end may reach a connection pool.end() is still closing.
    pool.on('error', () => {});
    await migrate(pool, 'pgqueue');
    await pool.query(raw.schema);
    await pool.query(`
      CREATE TABLE raw4 (LIKE ${raw.TABLE} INCLUDING DEFAULTS INCLUDING IDENTITY);
      ALTER TABLE raw4 ADD PRIMARY KEY (id), ADD COLUMN priority integer NOT NULL DEFAULT 0;
      CREATE INDEX ON raw4 (queue, priority, run_at, id) WHERE state = 'waiting';
      CREATE TABLE jobs_copy (LIKE pgqueue.jobs INCLUDING ALL);`);

    // 1. The server.
    const rest = ['bench', 'noop', 0, null, 0, 3, null, null, null, 'pgqueue_jobs'];
    const shape = (table, cols, sel, extra = []) => [
      `WITH ins AS (INSERT INTO ${table} ${cols} SELECT ${sel} FROM jsonb_array_elements($2::jsonb) AS p RETURNING id)
       SELECT array_agg(id ORDER BY id)::text AS ids, (SELECT pg_notify('x', $1)) AS woken FROM ins`,
      (p) => ['bench', `[${p.join(',')}]`, ...extra],
    ];
    const variants = {
      'raw reference, its own statement (text[] of JSON texts)': [raw.insertMany, (p) => ['bench', p]],
      'raw table, our statement shape (one jsonb array)': shape(raw.TABLE, '(queue, payload)', '$1, p'),
      '+ our 4-column claim index (raw4)': shape('raw4', '(queue, payload)', '$1, p'),
      'a copy of our jobs table (3 columns given)': shape('jobs_copy', '(queue, name, payload)', '$1, $3, p', ['noop']),
      'our jobs table, the library statement': [
        buildInsert('pgqueue', Array(9).fill(false), true, 'jsonb'),
        (p) => [`[${p.join(',')}]`, ...rest],
      ],
    };
    const c = await pool.connect();
    const times = {};
    for (let r = 0; r < REPS; r++) {
      const keys = Object.keys(variants);
      for (const k of r % 2 ? keys.reverse() : keys) {
        const [sql, params] = variants[k];
        await c.query('BEGIN');
        const { rows } = await c.query({
          text: `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${sql}`,
          values: params(payloads(0)),
        });
        await c.query('ROLLBACK');
        (times[k] ??= []).push(rows[0]['QUERY PLAN'][0]['Execution Time']);
      }
    }
    c.release();
    const version = (await pool.query('SHOW server_version')).rows[0].server_version;
    console.log(`## Server: one 1,000-row insert (EXPLAIN ANALYZE, TIMING OFF; median of ${REPS}, PostgreSQL ${version})\n`);
    console.log('| statement | execution ms |\n| --- | --- |');
    for (const [k, t] of Object.entries(times)) console.log(`| ${k} | ${median(t).toFixed(2)} |`);

    // 2. The producer.
    const store = new JobStore(pool, {
      schema: 'pgqueue',
      retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
      asyncCommit: true,
      preparedStatements: true,
      poolSize: 4,
    });
    const queue = new Queue('bench', store, resolveJobDefaults('bench', {}, DEFAULTS.job, 'defaults'), 1_048_576);
    let base = 0;
    const runs = {
      'addBulk (library)': async () => {
        const client = await pool.connect();
        try {
          for (let i = 0; i < CALLS; i++, base += 1000)
            await queue.addBulk(
              Array.from({ length: 1000 }, (_, k) => ({ name: 'noop', payload: { i: base + k } })),
              { client },
            );
        } finally {
          client.release();
        }
      },
      'insertMany (raw)': async () => {
        for (let i = 0; i < CALLS; i++, base += 1000) await pool.query(raw.named('insertMany', ['bench', payloads(base)]));
      },
    };
    const cpu = {};
    for (let r = 0; r < 6; r++) {
      for (const [k, run] of Object.entries(runs)) {
        const c0 = process.cpuUsage();
        await run();
        const d = process.cpuUsage(c0);
        if (r > 0) (cpu[k] ??= []).push((d.user + d.system) / 1000 / CALLS);
      }
      await pool.query(`TRUNCATE pgqueue.jobs, ${raw.TABLE}`);
    }
    console.log(`\n## Producer: CPU per 1,000 jobs (${CALLS} calls of 1,000, median of 5 rounds)\n`);
    console.log('| producer | CPU ms per 1,000 jobs |\n| --- | --- |');
    for (const [k, t] of Object.entries(cpu)) console.log(`| ${k} | ${median(t).toFixed(2)} |`);
    await pool.end();
  } finally {
    await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await a.end();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    process.exit(1);
  },
);
