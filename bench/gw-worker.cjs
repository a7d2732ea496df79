'use strict';
// Worker role, graphile-worker: run() with one no-op task `noop`, 10 handler slots, its other
// settings at their defaults (bench/gw-common.cjs). Same IPC protocol as lib-worker.cjs.
//
// Argument (JSON): { url, recordStarts? }

const { gw, logger } = require('./gw-common.cjs');
const { now, serve, roleArgs, sampleRss } = require('./role-common.cjs');

const args = roleArgs();
const rss = sampleRss(500);
const stats = { handled: 0, firstStart: 0, lastStart: 0 };
const starts = [];

async function main() {
  const runner = await gw.run({
    connectionString: args.url,
    concurrency: 10,
    noHandleSignals: true,
    logger,
    taskList: {
      noop: async (_payload, helpers) => {
        const t = now();
        if (stats.handled++ === 0) stats.firstStart = t;
        stats.lastStart = t;
        if (args.recordStarts) starts.push([String(helpers.job.id), t]);
      },
    },
  });
  serve({
    progress: () => ({ handled: stats.handled }),
    report: () => ({ ...stats, starts, rss, cpu: process.cpuUsage() }),
    stop: async () => {
      await runner.stop();
      process.exit(0);
    },
  });
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench gw-worker: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
