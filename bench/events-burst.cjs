'use strict';
// What a burst of outcomes does to the cross-process event listeners (docs/events.md, issue 28):
//
//   DATABASE_URL=postgres://... node bench/events-burst.cjs [jobs=20000] [workerProcesses=2]
//
// The BUILT package (`npm run build` first). A producer-only app (workers: false, this process)
// subscribes three ways: a counting `on('completed')` listener, an iterator read at once, and an
// iterator that reads one event per millisecond with bufferSize 1000 (a slow consumer). Worker
// processes (bench/lib-worker.cjs's app, concurrency 50, no-op handler) drain `jobs` jobs. Prints
// the outcome rate, what each listener got, the `lagged` totals, and the peak backlog of the
// hub and heap of this process (sampled every 10 ms). Then replays every completion as one
// NOTIFY each, in one transaction (a burst far above 10,000 a second) and prints the same. A fresh
// database is created and dropped.

const { spawn } = require('node:child_process');
const path = require('node:path');
const { Client } = require('pg');
const { pkg, bootApp, QUEUE } = require('./lib-context.cjs');

const JOBS = Number(process.argv[2] ?? 20_000);
const WORKERS = Number(process.argv[3] ?? 2);
const base = process.env.DATABASE_URL;
if (!base) throw new Error('DATABASE_URL is required');

const WORKER_SRC = `
require('reflect-metadata');
const { pkg, bootApp, QUEUE } = require(${JSON.stringify(path.join(__dirname, 'lib-context.cjs'))});
class P { run() { return 1; } }
pkg.Processor(QUEUE)(P);
pkg.Process()(P.prototype, 'run', Object.getOwnPropertyDescriptor(P.prototype, 'run'));
bootApp({ url: process.env.URL, workers: true, concurrency: 50, providers: [P] }).then((app) => {
  process.stdout.write('ready\\n');
  process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
});`;

async function main() {
  const name = `pgq_events_burst_${process.pid}`;
  const admin = new Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  const url = u.toString();
  let app = null;
  const workers = [];
  try {
    app = await bootApp({ url, workers: false });
    const queue = app.get(pkg.QueueService).getQueue(QUEUE);
    const events = queue.events();
    let counted = 0;
    let lastAt = 0;
    events.on('completed', () => {
      counted++;
      lastAt = Date.now();
    });
    let lagCalls = 0;
    let lagMissed = 0;
    events.on('lagged', (l) => {
      lagCalls++;
      lagMissed += l.missed;
    });
    const fast = { completed: 0, lagged: 0 };
    const slow = { completed: 0, lagged: 0 };
    void (async () => {
      for await (const e of events.iterate({ bufferSize: 1000 })) {
        if (e.event === 'completed') fast.completed++;
        else if (e.event === 'lagged') fast.lagged += e.args[0].missed;
      }
    })();
    void (async () => {
      for await (const e of events.iterate({ bufferSize: 1000 })) {
        if (e.event === 'completed') slow.completed++;
        else if (e.event === 'lagged') slow.lagged += e.args[0].missed;
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    // Peek at the hub's backlog (private: a benchmark may).
    const { PG_QUEUE_RUNTIME } = require(path.join(__dirname, '..', 'dist', 'module', 'pg-queue.constants.js'));
    const runtime = app.get(PG_QUEUE_RUNTIME, { strict: false });
    const hub = runtime?.connections?.[0]?.events;
    let peakPending = 0;
    let peakHeap = 0;
    const sampler = setInterval(() => {
      peakPending = Math.max(peakPending, hub?.pending?.size ?? 0);
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
    }, 10);
    const heapBefore = process.memoryUsage().heapUsed;

    for (let i = 0; i < JOBS; i += 5000) {
      await queue.addBulk(Array.from({ length: Math.min(5000, JOBS - i) }, (_, n) => ({ name: 'run', payload: { n: i + n } })));
    }
    const started = Date.now();
    for (let w = 0; w < WORKERS; w++) {
      const p = spawn(process.execPath, ['-e', WORKER_SRC], {
        env: { ...process.env, URL: url },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      workers.push(p);
    }
    const check = new Client({ connectionString: url });
    await check.connect();
    let drainedAt = 0;
    for (;;) {
      const { rows } = await check.query(`SELECT count(*)::int AS n FROM pgqueue.job_history WHERE state = 'completed'`);
      if (rows[0].n >= JOBS) {
        drainedAt = Date.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // Let the listeners finish what they will get (bounded: 30 s).
    let until = Date.now() + 30_000;
    while (counted + lagMissed < JOBS && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    const drainPhase = { heard: counted, missed: lagMissed, fast: { ...fast }, slow: { ...slow }, peakHubPending: peakPending };
    // Phase 2: the same completions published again, one notification per job, all in one
    // transaction: a burst far above 10,000 outcomes a second, as the listener sees it (each is
    // still confirmed by a read: the rows are there).
    peakPending = 0;
    const replayStart = Date.now();
    await check.query(
      `SELECT count(pg_notify('pgqueue_events', 'completed|' || queue || '|' || id || '.' || attempt)) FROM pgqueue.job_history`,
    );
    await check.end();
    until = Date.now() + 30_000;
    while (counted + lagMissed < 2 * JOBS && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    const replay = {
      notifications: JOBS,
      heard: counted - drainPhase.heard,
      missed: lagMissed - drainPhase.missed,
      msToHearOrDrop: Date.now() - replayStart,
      fastIterator: { completed: fast.completed - drainPhase.fast.completed, lagged: fast.lagged - drainPhase.fast.lagged },
      peakHubPending: peakPending,
    };
    clearInterval(sampler);
    const secs = (drainedAt - started) / 1000;
    const mb = (b) => (b / 1048576).toFixed(1);
    console.log(
      JSON.stringify(
        {
          jobs: JOBS,
          workerProcesses: WORKERS,
          drainSeconds: secs,
          outcomesPerSecond: Math.round(JOBS / secs),
          drain: {
            onCompleted: { heard: drainPhase.heard, missed: drainPhase.missed },
            iteratorFast: drainPhase.fast,
            iteratorSlow1msPerEvent: drainPhase.slow,
            peakHubPending: drainPhase.peakHubPending,
          },
          replayBurst: replay,
          laggedCalls: lagCalls,
          lastHeardMsAfterDrain: lastAt - drainedAt,
          heapBeforeMb: mb(heapBefore),
          peakHeapMb: mb(peakHeap),
        },
        null,
        2,
      ),
    );
    await events.close();
  } finally {
    for (const p of workers) p.kill('SIGTERM');
    await Promise.all(workers.map((p) => new Promise((r) => (p.exitCode !== null ? r() : p.once('exit', r)))));
    await app?.close();
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
