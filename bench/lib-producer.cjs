'use strict';
// Producer role, library: an application context with workers: false that enqueues through
// QueueService. Booting it also applies the migrations, so run.mjs uses it to create the schema.
//
// Argument (JSON): { url, libOptions? }
// Commands: { type: 'go', mode: 'single', total, callers }   10 callers, add() one job each call
//           { type: 'go', mode: 'bulk', total, batch }        one caller, addBulk(batch jobs)
//           { type: 'go', mode: 'latency', total, rate }      open loop, add() at `rate` per second
//           { type: 'stop' }

const { pkg, bootApp, QUEUE } = require('./lib-context.cjs');
const { now, serve, roleArgs, closedLoop, openLoop } = require('./role-common.cjs');

const args = roleArgs();

async function main() {
  const app = await bootApp({ url: args.url, workers: false, libOptions: args.libOptions });
  const queues = app.get(pkg.QueueService);
  serve({
    go: async (m) => {
      if (m.mode === 'single') {
        const elapsedMs = await closedLoop(m.total, m.callers, (i) => queues.add(QUEUE, 'noop', { i }));
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'bulk') {
        const calls = Math.ceil(m.total / m.batch);
        const elapsedMs = await closedLoop(calls, 1, (c) => {
          const n = Math.min(m.batch, m.total - c * m.batch);
          return queues.addBulk(
            QUEUE,
            Array.from({ length: n }, (_, k) => ({ name: 'noop', payload: { i: c * m.batch + k } })),
          );
        });
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'latency') {
        const commits = []; // [id, epoch ms the commit was acknowledged, epoch ms add() was called]
        const maxLagMs = await openLoop(m.total, m.rate, async (i) => {
          const sentAt = now();
          const job = await queues.add(QUEUE, 'noop', { i });
          commits.push([job.id, now(), sentAt]);
        });
        return { commits, maxLagMs, sent: m.total };
      }
      throw new Error(`unknown mode ${m.mode}`);
    },
    stop: async () => {
      await app.close();
      process.exit(0);
    },
  });
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench lib-producer: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
