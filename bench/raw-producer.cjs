'use strict';
// Producer role, raw-SQL reference: the same modes as lib-producer.cjs on a plain pg.Pool with
// pg's default size (10), each statement autocommitted (durably, as the library's enqueues) and
// prepared under its name (raw.named): single = a prepared INSERT + pg_notify per call from 10
// concurrent callers; bulk = one INSERT ... SELECT FROM unnest of 1,000 rows and one NOTIFY.
//
// Argument (JSON): { url }

const pg = require('pg');
const raw = require('./raw-sql.cjs');
const { now, serve, roleArgs, closedLoop, openLoop } = require('./role-common.cjs');

const args = roleArgs();

async function main() {
  const pool = new pg.Pool({ connectionString: args.url, application_name: 'bench-raw-producer' });
  // Every connection open before the clock starts, as a warm app would have them.
  const warm = await Promise.all(Array.from({ length: 10 }, () => pool.connect()));
  warm.forEach((c) => c.release());
  serve({
    go: async (m) => {
      if (m.mode === 'single') {
        const elapsedMs = await closedLoop(m.total, m.callers, (i) =>
          pool.query(raw.named('insertOne', ['bench', JSON.stringify({ i })])),
        );
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'bulk') {
        const calls = Math.ceil(m.total / m.batch);
        const elapsedMs = await closedLoop(calls, 1, (c) => {
          const n = Math.min(m.batch, m.total - c * m.batch);
          return pool.query(
            raw.named('insertMany', ['bench', Array.from({ length: n }, (_, k) => JSON.stringify({ i: c * m.batch + k }))]),
          );
        });
        return { elapsedMs, sent: m.total };
      }
      if (m.mode === 'latency') {
        const commits = [];
        const maxLagMs = await openLoop(m.total, m.rate, async (i) => {
          const sentAt = now();
          const { rows } = await pool.query(raw.named('insertOne', ['bench', JSON.stringify({ i })]));
          commits.push([rows[0].id, now(), sentAt]);
        });
        return { commits, maxLagMs, sent: m.total };
      }
      throw new Error(`unknown mode ${m.mode}`);
    },
    stop: async () => {
      await pool.end();
      process.exit(0);
    },
  });
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench raw-producer: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
