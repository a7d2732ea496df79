'use strict';
// Worker role, BullMQ (bullmq-common.cjs): a Worker with a no-op processor, concurrency 10, its
// other options at their defaults. It is built with autorun: false and started by the `run`
// command, so the clock starts when it may take jobs, as the other contenders' gate does; it
// counts completions from its own 'completed' events (BullMQ emits one after the job's
// completion is stored).
//
// Argument (JSON): { backend: 'pg' | 'redis', url, prefix?, recordStarts? }

const { now, serve, roleArgs, sampleRss, startBuckets } = require('./role-common.cjs');
const { bullmq, QUEUE, backendArgs } = require('./bullmq-common.cjs');

const args = roleArgs();
const rss = sampleRss(500);
const stats = { handled: 0, completed: 0, firstStart: 0, lastStart: 0, bootedAt: 0 };
const buckets = startBuckets();
const starts = [];

async function main() {
  const { opts, factory } = backendArgs(args);
  const worker = new bullmq.Worker(
    QUEUE,
    async (job) => {
      const t = now();
      if (stats.handled++ === 0) stats.firstStart = t;
      stats.lastStart = t;
      buckets.hit(t);
      if (args.recordStarts) starts.push([String(job.id), t]);
    },
    { ...opts, concurrency: 10, autorun: args.autorun ?? false },
    factory,
  );
  worker.on('completed', () => stats.completed++);
  worker.on('error', (err) => process.stderr.write(`bench bullmq-worker: ${err.message}\n`));
  await worker.waitUntilReady();
  serve({
    run: () => {
      void worker.run();
      return {};
    },
    progress: () => ({ handled: stats.handled, completed: stats.completed }),
    report: () => ({ ...stats, starts, rss, cpu: process.cpuUsage(), buckets, processStart: performance.timeOrigin }),
    stop: async () => {
      await worker.close();
      process.exit(0);
    },
  });
  stats.bootedAt = now();
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench bullmq-worker: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
