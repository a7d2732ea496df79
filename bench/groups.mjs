// Groups (docs/groups.md, issue 29): one tenant floods a queue shared by 1,000 groups. The same
// backlog (default 200,000 jobs; group g0000 holds 90 %, the other 999 share the rest, added
// after the flood) is drained three times in one run on one server, each by one process:
//   - grouped: registerQueue({ group: {} }) (fair turns; --group-concurrency=N adds a limit),
//     jobs added with their group;
//   - plain:   the same queue without groups, jobs added without a group;
//   - raw:     the raw-SQL loop of bench/raw-sql.cjs (claim a batch with SKIP LOCKED, delete it;
//     no history, no retries: the ceiling), --raw-loops loops.
// Printed: each drain's jobs/s and the grouped/plain ratio (target >= 0.8); the small groups'
// wait (started_at minus the drain's start, database clock) p50/p95 grouped and plain; and
// fairness: the flood group's share of the first 10 % of claims, against its fair share
// (1 / groups with work) and plain's, and the spread of the small groups' shares.
//
//   npm run build && node bench/groups.mjs [--jobs=200000] [--groups=1000] [--concurrency=50]
//        [--group-concurrency=N] [--raw-loops=2] [--plain-first]
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability, like bench/run.mjs. Not part of `npm run bench` (its contenders are
// other libraries); run it by hand. Read its figures as orders of magnitude on a shared machine.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { numberArg, withScratchDatabase } from './scratch-database.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
require('reflect-metadata');
const lib = require(path.join(here, '..', 'dist'));
const raw = require('./raw-sql.cjs');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');

const JOBS = numberArg('jobs', 200_000);
const GROUPS = numberArg('groups', 1000);
const CONCURRENCY = numberArg('concurrency', 50);
const GROUP_CONCURRENCY = numberArg('group-concurrency', null);
const RAW_LOOPS = numberArg('raw-loops', 2);
const FLOOD = Math.round(JOBS * 0.9);
const PLAIN_FIRST = process.argv.includes('--plain-first');

/** Inserts the backlog into queue `queue`: the flood first, then the small groups round-robin. */
async function preload(sql, queue, withGroups) {
  const g = (expr) => (withGroups ? expr : 'NULL');
  await sql.query(
    `INSERT INTO pgqueue.jobs (queue, name, payload, group_key)
     SELECT $1, 'job', jsonb_build_object('i', i), ${g(`'g0000'`)} FROM generate_series(1, $2) i`,
    [queue, FLOOD],
  );
  await sql.query(
    `INSERT INTO pgqueue.jobs (queue, name, payload, group_key)
     SELECT $1, 'job', jsonb_build_object('i', i), ${g(`'g' || lpad((1 + i % ($3::int - 1))::text, 4, '0')`)}
     FROM generate_series(1, $2) i WHERE $3::int > 0`,
    [queue, JOBS - FLOOD, GROUPS],
  );
  await sql.query('VACUUM ANALYZE pgqueue.jobs');
}

/** Drains queue `queue` with one app (one worker, CONCURRENCY slots); resolves with the drain's start (db clock) and ms. */
async function drainLib(url, sql, queue, group) {
  class P {
    run() {
      return undefined;
    }
  }
  lib.Processor(queue)(P);
  lib.Process()(P.prototype, 'run', Object.getOwnPropertyDescriptor(P.prototype, 'run'));
  class M {}
  Module({
    imports: [
      lib.PgQueueModule.forRoot({ connection: url, migrate: false }),
      lib.PgQueueModule.registerQueue({ name: queue, concurrency: CONCURRENCY, ...(group ? { group } : {}) }),
    ],
    providers: [P],
  })(M);
  const app = await NestFactory.createApplicationContext(M, { logger: false });
  const {
    rows: [{ t }],
  } = await sql.query('SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS t');
  const t0 = performance.now();
  await app.init();
  await untilEmpty(sql, queue);
  const ms = performance.now() - t0;
  await app.close();
  return { startedAt: t, ms };
}

async function untilEmpty(sql, queue) {
  for (;;) {
    const { rows } = await sql.query(`SELECT 1 FROM pgqueue.jobs WHERE queue = $1 LIMIT 1`, [queue]);
    if (!rows.length) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function drainRaw(url) {
  const pool = new pg.Pool({ connectionString: url, max: RAW_LOOPS });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: RAW_LOOPS }, async () => {
      for (;;) {
        const { rows } = await pool.query(raw.named('claim', ['bench', 200]));
        if (!rows.length) return;
        await pool.query(raw.named('remove', [rows.map((r) => r.id)]));
      }
    }),
  );
  const ms = performance.now() - t0;
  await pool.end();
  return { ms };
}

/** Every job's start, from history, in ms after `startedAt`, in the order they started. */
async function waits(sql, queue, startedAt) {
  const { rows } = await sql.query(
    `SELECT extract(epoch FROM started_at)::float8 * 1000 - $2 AS w, group_key, payload->>'i' AS i
     FROM pgqueue.job_history WHERE queue = $1 ORDER BY started_at, id`,
    [queue, startedAt],
  );
  return rows;
}

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');

async function main() {
  await withScratchDatabase('bench_groups', run);
}

async function run(dbUrl) {
  // Migrations, once, by a producer-only app.
  class Boot {}
  Module({ imports: [lib.PgQueueModule.forRoot({ connection: dbUrl, workers: false })] })(Boot);
  const boot = await NestFactory.createApplicationContext(Boot, { logger: false });
  await boot.init();
  await boot.close();
  const sql = new pg.Client({ connectionString: dbUrl });
  await sql.connect();
  try {
    const group = GROUP_CONCURRENCY ? { concurrency: GROUP_CONCURRENCY } : {};
    process.stderr.write(`preloading ${JOBS} jobs x 2 (${GROUPS} groups, ${FLOOD} in g0000)\n`);
    // Each drain runs on the table the other left (dead tuples, warm caches, a warm JIT): the
    // order alternates with --plain-first, to read both.
    const runGrouped = async () => {
      await preload(sql, 'grouped', true);
      const r = await drainLib(dbUrl, sql, 'grouped', group);
      process.stderr.write(`grouped drained in ${fmt(r.ms)} ms\n`);
      return r;
    };
    const runPlain = async () => {
      await preload(sql, 'plain', false);
      const r = await drainLib(dbUrl, sql, 'plain', null);
      process.stderr.write(`plain drained in ${fmt(r.ms)} ms\n`);
      return r;
    };
    let grouped, plain;
    if (PLAIN_FIRST) {
      plain = await runPlain();
      grouped = await runGrouped();
    } else {
      grouped = await runGrouped();
      plain = await runPlain();
    }
    await sql.query(raw.schema);
    await sql.query(raw.preload, [JOBS]);
    await sql.query(`VACUUM ANALYZE ${raw.TABLE}`);
    const rawRun = await drainRaw(dbUrl);

    // Waits: the small groups' jobs (grouped: group_key <> g0000; plain: the last JOBS - FLOOD added).
    const g = await waits(sql, 'grouped', grouped.startedAt);
    const gSmall = g.filter((r) => r.group_key !== 'g0000').map((r) => r.w);
    // plain's rows carry no group: its small jobs are those of the second insert, the higher ids.
    const { rows: pIds } = await sql.query(
      `SELECT extract(epoch FROM started_at)::float8 * 1000 - $2 AS w FROM pgqueue.job_history
       WHERE queue = $1 ORDER BY id DESC LIMIT $3`,
      ['plain', plain.startedAt, JOBS - FLOOD],
    );
    const pSmallW = pIds.map((r) => r.w);
    // Fairness: the first 10 % of claims, by start.
    const first = g.slice(0, Math.max(1, Math.floor(JOBS / 10)));
    const per = new Map();
    for (const r of first) per.set(r.group_key, (per.get(r.group_key) ?? 0) + 1);
    const floodShare = (per.get('g0000') ?? 0) / first.length;
    const smallShares = [...per.entries()].filter(([k]) => k !== 'g0000').map(([, n]) => n / first.length);
    const groupsSeen = per.size;

    // Claims: each claim stamps its jobs with one started_at (the claim's clock), so the distinct
    // starts count the claims, and jobs per claim say whether the drain was batched alike.
    const { rows: claimRows } = await sql.query(
      `SELECT queue, count(DISTINCT started_at)::int AS claims FROM pgqueue.job_history
       WHERE queue IN ('grouped', 'plain') GROUP BY queue`,
    );
    const claims = Object.fromEntries(claimRows.map((r) => [r.queue, r.claims]));

    // Phases of the grouped drain: while the small groups have work (until the last of their
    // jobs started), then the flood group alone, against plain's rate over its whole drain.
    const smallEnd = Math.max(...gSmall);
    const floodAfter = g.filter((r) => r.w > smallEnd).length;
    const floodRate = (floodAfter / Math.max(1, grouped.ms - smallEnd)) * 1000;
    const smallRate = ((JOBS - floodAfter) / Math.max(1, smallEnd)) * 1000;

    const rate = (ms) => (JOBS / ms) * 1000;
    const lines = [
      `# bench/groups.mjs: ${JOBS.toLocaleString('en-US')} jobs, ${GROUPS} groups (g0000 holds 90 %), concurrency ${CONCURRENCY}, group ${JSON.stringify(group)}`,
      '',
      '| drain | ms | jobs/s | vs plain |',
      '|---|---:|---:|---:|',
      `| grouped (fair turns) | ${fmt(grouped.ms)} | ${fmt(rate(grouped.ms))} | ${(plain.ms / grouped.ms).toFixed(2)}x |`,
      `| plain (no groups) | ${fmt(plain.ms)} | ${fmt(rate(plain.ms))} | 1.00x |`,
      `| raw SQL loop (${RAW_LOOPS} loops, no history) | ${fmt(rawRun.ms)} | ${fmt(rate(rawRun.ms))} | ${(plain.ms / rawRun.ms).toFixed(2)}x |`,
      '',
      `Small groups' jobs (${(JOBS - FLOOD).toLocaleString('en-US')}), start after the drain began: grouped p50 ${fmt(pct(gSmall, 50))} ms, p95 ${fmt(pct(gSmall, 95))} ms; plain p50 ${fmt(pct(pSmallW, 50))} ms, p95 ${fmt(pct(pSmallW, 95))} ms.`,
      `Grouped drain by phase: the first ${fmt(smallEnd)} ms (until the last small group's job started) ${fmt(smallRate)} jobs/s; ` +
        `then the flood group alone (${fmt(floodAfter)} jobs) ${fmt(floodRate)} jobs/s; plain ${fmt(rate(plain.ms))} jobs/s throughout.`,
      `Claims: grouped ${fmt(claims.grouped)} (${fmt(JOBS / claims.grouped)} jobs each), plain ${fmt(claims.plain)} (${fmt(JOBS / claims.plain)} jobs each).`,
      `Fairness, first ${first.length.toLocaleString('en-US')} claims of the grouped drain: ${groupsSeen} groups served; flood group's share ${(floodShare * 100).toFixed(2)} % ` +
        `(fair share while all ${GROUPS} have work: ${(100 / GROUPS).toFixed(2)} %; plain: 100 %); small groups' shares p5/p50/p95 ` +
        `${(pct(smallShares, 5) * 100).toFixed(3)} / ${(pct(smallShares, 50) * 100).toFixed(3)} / ${(pct(smallShares, 95) * 100).toFixed(3)} %.`,
    ];
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    await sql.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
