'use strict';
// The chaos suite's producer: enqueues 'chaos'/'tick' jobs at a steady rate through the BUILT
// package, each in a transaction that also records its sequence number in `chaos_enqueued`, so
// the database itself says which jobs were committed (the outbox pattern under test). A batch
// whose transaction fails is not retried: like a web request during an outage, it never
// happened, and `chaos_enqueued` never lists it. The producer also remembers every batch whose
// COMMIT was acknowledged: the driver checks each of those is in the database (after a server
// crash, an acknowledged commit that is missing is a lost job even though no table shows it).
//
// Argument (JSON): { url }. IPC commands: { type: 'rate', perSec }, { type: 'burst', n },
// { type: 'stop' } (answers { type: 'stop', committed, failedBatches, skippedTicks, acked }, where
// `acked` is [first seq, count] of every acknowledged batch).

require('reflect-metadata');
const path = require('node:path');

const pkg = require(path.resolve(__dirname, '..', '..', 'dist'));
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Pool } = require('pg');

const TICK_MS = 10;
/** Transactions in flight at most; ticks beyond that are skipped, as a saturated app would shed load. */
const MAX_IN_FLIGHT = 4;
const { url } = JSON.parse(process.argv[2]);

const pool = new Pool({ connectionString: url, max: MAX_IN_FLIGHT + 1, application_name: 'chaos-producer' });
pool.on('error', () => undefined);

let queue;
let perSec = 0;
let seq = 0;
let owed = 0;
let inFlight = 0;
let committed = 0;
let failedBatches = 0;
let skippedTicks = 0;
const acked = [];

/** One transaction: the sequence numbers and their jobs commit together or not at all. */
async function enqueue(n) {
  const seqs = Array.from({ length: n }, () => ++seq);
  inFlight++;
  let client;
  try {
    client = await pool.connect();
    // Checked out, a client has no error listener; a backend killed between statements would crash us.
    if (!client.listenerCount('error')) client.on('error', () => undefined);
    await client.query('BEGIN');
    await client.query('INSERT INTO chaos_enqueued (seq) SELECT unnest($1::bigint[])', [seqs]);
    if (n === 1) await queue.add('tick', { seq: seqs[0] }, { client });
    else
      await queue.addBulk(
        seqs.map((s) => ({ name: 'tick', payload: { seq: s } })),
        { client },
      );
    await client.query('COMMIT');
    committed += n;
    acked.push([seqs[0], n]);
  } catch {
    failedBatches++;
    await client?.query('ROLLBACK').catch(() => undefined);
  } finally {
    client?.release();
    inFlight--;
  }
}

function tick() {
  owed += (perSec * TICK_MS) / 1000;
  const n = Math.floor(owed);
  if (n < 1) return;
  owed -= n;
  if (inFlight >= MAX_IN_FLIGHT) {
    skippedTicks++;
    return;
  }
  // Large rates go out in transactions of at most 1,000 jobs.
  for (let left = n; left > 0 && inFlight < MAX_IN_FLIGHT; left -= 1000) void enqueue(Math.min(left, 1000));
}

class ProducerModule {}
Module({
  imports: [
    pkg.PgQueueModule.forRoot({ connection: { connectionString: url, application_name: 'chaos-producer:lib' }, workers: false }),
    pkg.PgQueueModule.registerQueue({ name: 'chaos' }),
  ],
})(ProducerModule);

async function main() {
  const app = await NestFactory.createApplicationContext(ProducerModule, { logger: ['error', 'fatal'], abortOnError: false });
  queue = app.get(pkg.getQueueToken('chaos'));
  const timer = setInterval(tick, TICK_MS);
  process.on('message', async (m) => {
    if (m.type === 'rate') {
      perSec = m.perSec;
      owed = 0;
      process.send({ type: 'rate', committed }); // the jobs committed so far: scenario 8 checks the load it offered
    } else if (m.type === 'burst') {
      // One transaction, one statement for the jobs: "tens of thousands in one go".
      await enqueue(m.n);
      process.send({ type: 'burst', committed });
    } else if (m.type === 'stop') {
      clearInterval(timer);
      perSec = 0;
      while (inFlight > 0) await new Promise((r) => setTimeout(r, 10));
      await app.close();
      await pool.end();
      // Disconnect only once the answer is out: `acked` of a --long run (tens of thousands of
      // batches) is still being written when send() returns, and a disconnect then dropped it.
      process.send({ type: 'stop', committed, failedBatches, skippedTicks, acked }, () => process.disconnect());
    }
  });
  process.send({ type: 'ready' });
}

main().catch((err) => {
  process.stderr.write(`[producer] boot failed: ${err.stack ?? err}\n`);
  process.exit(2);
});
