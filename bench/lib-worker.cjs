'use strict';
// Worker role, library: an application context whose @Processor('bench') has one no-op
// @Process() handler (concurrency 10 unless told otherwise). It records when handlers start;
// run.mjs decides when the drain begins and counts completions in the database.
//
// With `dashboard`, the app also serves the dashboard over HTTP (the `dashboard` command answers
// its URL), so a poller's reads run in the same process and pool as the workers, as in an app.
//
// Argument (JSON): { url, concurrency?, recordStarts?, libOptions?, dashboard? }

const { now, serve, roleArgs, sampleRss, startBuckets, traceQueries } = require('./role-common.cjs');
// Before the package loads: the pools it makes use this pg.
const trace = traceQueries(require('pg'));
const { pkg, bootApp, QUEUE } = require('./lib-context.cjs');

const args = roleArgs();
const rss = sampleRss(500);
const stats = { handled: 0, firstStart: 0, lastStart: 0, bootedAt: 0 };
const buckets = startBuckets();
const starts = []; // [id, epoch ms] pairs, only with recordStarts (the latency workload)

class BenchProcessor {
  async run(job) {
    const t = now();
    if (stats.handled++ === 0) stats.firstStart = t;
    stats.lastStart = t;
    buckets.hit(t);
    if (args.recordStarts) starts.push([job.id, t]);
  }
}
pkg.Processor(QUEUE)(BenchProcessor);
pkg.Process()(BenchProcessor.prototype, 'run', Object.getOwnPropertyDescriptor(BenchProcessor.prototype, 'run'));

async function main() {
  const app = await bootApp({
    url: args.url,
    workers: true,
    concurrency: args.concurrency ?? 10,
    libOptions: args.libOptions,
    providers: [BenchProcessor],
    dashboard: !!args.dashboard,
  });
  serve({
    progress: () => ({ handled: stats.handled }),
    dashboard: async () => ({ url: args.dashboard ? `${await app.getUrl()}/queues` : null }),
    report: () => ({ ...stats, starts, rss, cpu: process.cpuUsage(), buckets, trace, processStart: performance.timeOrigin }),
    stop: async () => {
      await app.close();
      process.exit(0);
    },
  });
  stats.bootedAt = now();
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench lib-worker: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
