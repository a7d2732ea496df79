'use strict';
// Producer role, graphile-worker: makeWorkerUtils() at its defaults (a pool of 10), the same
// modes as lib-producer.cjs: single = addJob() from 10 concurrent callers; bulk = addJobs() of
// 1,000 specs per call (one add_jobs() statement); latency = addJob() on an open-loop schedule.
// Booting it runs graphile-worker's migrations, so the workloads use it to create its schema.
//
// Argument (JSON): { url }

const { gw, logger } = require('./gw-common.cjs');
const { now, serve, roleArgs, closedLoop, openLoop } = require('./role-common.cjs');

const args = roleArgs();

async function main() {
  const utils = await gw.makeWorkerUtils({ connectionString: args.url, logger });
  await utils.migrate();
  serve({
    go: async (m) => {
      if (m.mode === 'single') {
        const elapsedMs = await closedLoop(m.total, m.callers, (i) => utils.addJob('noop', { i }));
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'bulk') {
        const calls = Math.ceil(m.total / m.batch);
        const elapsedMs = await closedLoop(calls, 1, (c) => {
          const n = Math.min(m.batch, m.total - c * m.batch);
          return utils.addJobs(Array.from({ length: n }, (_, k) => ({ identifier: 'noop', payload: { i: c * m.batch + k } })));
        });
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'latency') {
        const commits = [];
        const maxLagMs = await openLoop(m.total, m.rate, async (i) => {
          const sentAt = now();
          const job = await utils.addJob('noop', { i });
          commits.push([String(job.id), now(), sentAt]);
        });
        return { commits, maxLagMs, sent: m.total };
      }
      throw new Error(`unknown mode ${m.mode}`);
    },
    stop: async () => {
      await utils.release();
      process.exit(0);
    },
  });
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench gw-producer: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
