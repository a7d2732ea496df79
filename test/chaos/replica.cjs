'use strict';
// One replica of the chaos suite's app: the BUILT package (../../dist) in a plain Nest
// application context, as an app runs it in production. Queue 'chaos', job 'tick': a 1 ms no-op
// that records its run in `chaos_done` (one row per job, `runs` counts every run after the
// first), on the app's own pool, as an app's repository would.
//
// Argument (JSON): { url, options, concurrency, startsFile } where `options` are PgQueueModule
// options merged over the suite's defaults, `concurrency` is the queue's (20; 16 with --long) and
// `startsFile` is where each run's start is appended (see tick). IPC: sends
// { type: 'ready' } once the workers run. SIGTERM runs Nest's
// shutdown hooks (graceful stop), then the process exits by itself with code 0; if something
// still holds the event loop EXIT_WATCHDOG_MS later, it exits with 3 and says what.

require('reflect-metadata');
const fs = require('node:fs');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');

const pkg = require(path.resolve(__dirname, '..', '..', 'dist'));
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Pool } = require('pg');

const EXIT_WATCHDOG_MS = 3000;
const { url, options = {}, concurrency = 20, startsFile } = JSON.parse(process.argv[2]);
const tag = `[replica ${process.pid}]`;

const appPool = new Pool({ connectionString: url, max: 10, application_name: `chaos-replica:${process.pid}:app` });
appPool.on('error', (err) => process.stderr.write(`${tag} app pool: ${err.message}\n`));

class ChaosProcessor {
  async tick(job) {
    const startedAt = Date.now();
    // Every run's claim time, before anything can fail: a run whose own insert below a server
    // crash cuts leaves no row, and its claim (committed asynchronously just before the crash)
    // may be the one the crash forgot. The driver takes each job's earliest claim from these
    // lines and chaos_done together (cluster.mjs, recordRunStarts). A write() reaches the page
    // cache at once, so the line outlives a SIGKILL of this process.
    if (startsFile) fs.appendFileSync(startsFile, `${job.payload.seq} ${job.startedAt.getTime()}\n`);
    await sleep(1);
    await appPool.query(
      `INSERT INTO chaos_done (seq, created_at, started_at, done_at, pid, claimed_at)
       VALUES ($1, to_timestamp($2 / 1000.0), to_timestamp($3 / 1000.0), clock_timestamp(), $4, to_timestamp($5 / 1000.0))
       ON CONFLICT (seq) DO UPDATE SET runs = chaos_done.runs + 1, claimed_at = least(chaos_done.claimed_at, EXCLUDED.claimed_at)`,
      [job.payload.seq, job.createdAt.getTime(), startedAt, process.pid, job.startedAt.getTime()],
    );
  }

  // After the queue's workers stopped (they stop in onModuleDestroy).
  async onApplicationShutdown() {
    await appPool.end();
  }
}
pkg.Processor('chaos')(ChaosProcessor);
pkg.Process('tick')(ChaosProcessor.prototype, 'tick', Object.getOwnPropertyDescriptor(ChaosProcessor.prototype, 'tick'));

class ReplicaModule {}
Module({
  imports: [
    pkg.PgQueueModule.forRoot({
      // The pid in every connection's name: the driver can tell this replica's statements apart.
      connection: { connectionString: url, application_name: `chaos-replica:${process.pid}` },
      // Idempotent work: retry through outages (a handler whose own insert hits a killed
      // connection fails its attempt) rather than fail the job.
      defaultJobOptions: { attempts: 20, backoff: { type: 'exponential', delayMs: 200, maxDelayMs: 5_000 } },
      ...options,
    }),
    pkg.PgQueueModule.registerQueue({ name: 'chaos', concurrency }),
  ],
  providers: [ChaosProcessor],
})(ReplicaModule);

const write =
  (level) =>
  (message, ...rest) => {
    const extra = rest.filter((r) => typeof r === 'string' && r.includes('\n')).join('\n');
    process.stderr.write(`${new Date().toISOString()} ${tag} ${level} ${String(message)}${extra ? '\n' + extra : ''}\n`);
  };
const logger = {
  log: () => undefined,
  debug: () => undefined,
  verbose: () => undefined,
  warn: write('WARN'),
  error: write('ERROR'),
  fatal: write('FATAL'),
};

function afterNestShutdown(signal) {
  if (process.listeners(signal).some((l) => l !== afterNestShutdown)) return; // Nest's own listener runs first
  process.disconnect?.();
  setTimeout(() => {
    process.stderr.write(
      `${tag} still alive ${EXIT_WATCHDOG_MS} ms after the app closed: ${JSON.stringify(process.getActiveResourcesInfo())}\n`,
    );
    process.exit(3);
  }, EXIT_WATCHDOG_MS).unref();
}

// Never outlive the driver.
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid) process.exit(4);
}, 500).unref();

async function main() {
  const app = await NestFactory.createApplicationContext(ReplicaModule, { logger, abortOnError: false });
  app.enableShutdownHooks(['SIGTERM']);
  process.on('SIGTERM', afterNestShutdown);
  await app.init();
  process.send({ type: 'ready' });
}

main().catch((err) => {
  process.stderr.write(`${tag} boot failed: ${err.stack ?? err}\n`);
  process.exit(2);
});
