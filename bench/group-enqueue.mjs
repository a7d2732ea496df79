// What a group costs the producer (docs/groups.md, issue 29): addBulk of 1,000 jobs into a queue
// without groups, with a group given per job (`opts.group`), and with the group computed by the
// queue's `defaultJobOptions.group(payload)`, beside the raw-SQL loop's bulk insert
// (bench/raw-sql.cjs: INSERT ... SELECT FROM unnest of 1,000 payloads), in one process on one
// server, the four interleaved round by round.
//
//   npm run build && node bench/group-enqueue.mjs [--rounds=5] [--calls=40] [--groups=100]
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability, like bench/run.mjs. Not part of `npm run bench`; run it by hand.

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

const ROUNDS = numberArg('rounds', 5);
const CALLS = numberArg('calls', 40);
const GROUPS = numberArg('groups', 100);
const BATCH = 1000;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (n) => Math.round(n).toLocaleString('en-US');

async function main() {
  await withScratchDatabase('bench_group_enqueue', run);
}

async function run(dbUrl) {
  class M {}
  Module({
    imports: [
      lib.PgQueueModule.forRoot({ connection: dbUrl, workers: false }),
      lib.PgQueueModule.registerQueue(
        { name: 'plain' },
        { name: 'given', group: {} },
        { name: 'computed', group: {}, defaultJobOptions: { group: (p) => `tenant-${p.tenant}` } },
      ),
    ],
  })(M);
  const app = await NestFactory.createApplicationContext(M, { logger: ['warn', 'error'] });
  await app.init();
  const queues = app.get(lib.QueueService);
  const pool = new pg.Pool({ connectionString: dbUrl, max: 1 });
  await pool.query(raw.schema);

  const payloads = (c) => Array.from({ length: BATCH }, (_, k) => ({ i: c * BATCH + k, tenant: (c * BATCH + k) % GROUPS }));
  const variants = {
    'no group': (c) =>
      queues.addBulk(
        'plain',
        payloads(c).map((payload) => ({ name: 'job', payload })),
      ),
    'opts.group per job': (c) =>
      queues.addBulk(
        'given',
        payloads(c).map((payload) => ({ name: 'job', payload, opts: { group: `tenant-${payload.tenant}` } })),
      ),
    'defaultJobOptions.group(payload)': (c) =>
      queues.addBulk(
        'computed',
        payloads(c).map((payload) => ({ name: 'job', payload })),
      ),
    'raw SQL loop (unnest insert)': (c) =>
      pool.query(raw.named('insertMany', ['bench', payloads(c).map((p) => JSON.stringify(p))])),
  };
  const rates = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  let call = 0;
  // One warm-up call each (plans, the JIT), not counted.
  for (const run of Object.values(variants)) await run(call++);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, run] of Object.entries(variants)) {
      const t0 = performance.now();
      for (let i = 0; i < CALLS; i++) await run(call++);
      rates[k].push((CALLS * BATCH * 1000) / (performance.now() - t0));
    }
  }
  const base = median(rates['no group']);
  const lines = [
    `# bench/group-enqueue.mjs: addBulk of ${BATCH} jobs, ${CALLS} calls per round, ${ROUNDS} rounds interleaved, ${GROUPS} groups`,
    '',
    '| enqueue | jobs/s, median (min-max) | vs no group |',
    '|---|---:|---:|',
    ...Object.entries(rates).map(
      ([k, v]) =>
        `| ${k} | ${fmt(median(v))} (${fmt(Math.min(...v))}-${fmt(Math.max(...v))}) | ${(median(v) / base).toFixed(2)}x |`,
    ),
  ];
  process.stdout.write(lines.join('\n') + '\n');
  await pool.end();
  await app.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
