'use strict';
// Producer role, BullMQ (bullmq-common.cjs): a Queue at its defaults; the same modes as
// lib-producer.cjs (single: add() from 10 concurrent callers; bulk: addBulk of `batch`; latency:
// add() at `rate` per second, open loop), plus `preload` (a drain's backlog through addBulk, not
// timed), `count` (jobs stored, any state) and `clean` (obliterate: the Redis runs share one server).
//
// Argument (JSON): { backend: 'pg' | 'redis', url, prefix?, migrate? }

const { now, serve, roleArgs, closedLoop, openLoop } = require('./role-common.cjs');
const { bullmq, QUEUE, backendArgs } = require('./bullmq-common.cjs');

const args = roleArgs();

async function main() {
  const { opts, factory } = backendArgs(args, { migrate: !!args.migrate });
  const queue = new bullmq.Queue(QUEUE, opts, factory);
  await queue.waitUntilReady();
  const bulk = (n, from) => queue.addBulk(Array.from({ length: n }, (_, k) => ({ name: 'noop', data: { i: from + k } })));
  serve({
    go: async (m) => {
      if (m.mode === 'single') {
        const elapsedMs = await closedLoop(m.total, m.callers, (i) => queue.add('noop', { i }));
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'bulk' || m.mode === 'preload') {
        const calls = Math.ceil(m.total / m.batch);
        const elapsedMs = await closedLoop(calls, 1, (c) => bulk(Math.min(m.batch, m.total - c * m.batch), c * m.batch));
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'latency') {
        const commits = [];
        const maxLagMs = await openLoop(m.total, m.rate, async (i) => {
          const sentAt = now();
          const job = await queue.add('noop', { i });
          commits.push([String(job.id), now(), sentAt]);
        });
        return { commits, maxLagMs, sent: m.total };
      }
      throw new Error(`unknown mode ${m.mode}`);
    },
    count: async () => {
      const c = await queue.getJobCounts();
      return { n: Object.values(c).reduce((a, b) => a + b, 0), counts: c };
    },
    clean: async () => {
      await queue.obliterate({ force: true });
      return {};
    },
    stop: async () => {
      await queue.close();
      process.exit(0);
    },
  });
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench bullmq-producer: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
