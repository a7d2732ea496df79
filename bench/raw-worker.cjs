'use strict';
// Worker role, raw-SQL reference: as fast as plain SQL with `pg` gets. `loops` concurrent claim
// loops (default 10) share a pg.Pool of as many connections; each claims 100 jobs
// (UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 100) RETURNING), runs them
// concurrently (Promise.all), deletes the batch with one DELETE ... WHERE id = ANY($1), and goes
// on while its claim came back full; every statement is a named prepared statement. A LISTEN
// connection wakes one idle loop per notification, and a 1 s poll is the floor (the library's
// idle poll runs at most every 1 s too). A loop whose claim came back full wakes another idle
// loop, so a backlog has every loop on it within a few claims.
//
// `--raw-loops=1` gives the earlier, weaker reference (one connection looping), for comparison.
//
// Argument (JSON): { url, recordStarts?, batch? (default 100; --raw-batch), loops? (default 10; --raw-loops), nest? }

const pg = require('pg');
const raw = require('./raw-sql.cjs');
const { now, serve, roleArgs, sampleRss, fail, startBuckets, traceQueries } = require('./role-common.cjs');

const trace = traceQueries(pg);
const args = roleArgs();
const BATCH = args.batch ?? 100;
const LOOPS = args.loops ?? 10;
const rss = sampleRss(500);
const stats = { handled: 0, firstStart: 0, lastStart: 0, claims: 0, bootedAt: 0 };
const buckets = startBuckets();
const starts = [];

async function handle(row) {
  const t = now();
  if (stats.handled++ === 0) stats.firstStart = t;
  stats.lastStart = t;
  buckets.hit(t);
  if (args.recordStarts) starts.push([row.id, t]);
}

async function main() {
  // nest: the same loop in an empty NestJS application context, booted first: what a hand-written
  // loop in a Nest app pays before its first job (the first-job workload's raw-nest run).
  if (args.nest) {
    require('reflect-metadata');
    const { Module } = require('@nestjs/common');
    const { NestFactory } = require('@nestjs/core');
    class EmptyModule {}
    Module({})(EmptyModule);
    await NestFactory.createApplicationContext(EmptyModule, { logger: ['warn', 'error', 'fatal'] });
  }
  const pool = new pg.Pool({ connectionString: args.url, max: LOOPS, application_name: 'bench-raw-worker' });
  const listener = new pg.Client({ connectionString: args.url, application_name: 'bench-raw-worker:listen' });
  // Open every connection before the clock starts, as a warm app would have them.
  const warm = await Promise.all(Array.from({ length: LOOPS }, () => pool.connect()));
  warm.forEach((c) => c.release());
  await listener.connect();

  let stopping = false;
  let busy = 0;
  const loop = async () => {
    busy++;
    try {
      while (!stopping) {
        const { rows } = await pool.query(raw.named('claim', ['bench', BATCH]));
        stats.claims++;
        if (rows.length === 0) break;
        if (rows.length === BATCH) kick();
        await Promise.all(rows.map(handle));
        await pool.query(raw.named('remove', [rows.map((r) => r.id)]));
        if (rows.length < BATCH) break;
      }
    } finally {
      busy--;
    }
  };
  function kick() {
    if (!stopping && busy < LOOPS) loop().catch(fail);
  }
  listener.on('notification', kick);
  await listener.query(`LISTEN ${raw.CHANNEL}`);
  setInterval(kick, 1000).unref();
  for (let i = 0; i < LOOPS; i++) kick();

  serve({
    progress: () => ({ handled: stats.handled }),
    report: () => ({ ...stats, starts, rss, cpu: process.cpuUsage(), buckets, trace, processStart: performance.timeOrigin }),
    stop: async () => {
      stopping = true;
      while (busy) await new Promise((r) => setTimeout(r, 5));
      await Promise.all([pool.end(), listener.end()]);
      process.exit(0);
    },
  });
  stats.bootedAt = now();
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench raw-worker: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
