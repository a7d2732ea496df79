'use strict';
// Worker role, raw-SQL reference: one `pg` connection runs a plain loop (claim 100 jobs, run
// them concurrently, delete them with one statement) while there is work; a second connection
// LISTENs for wake-ups, and a 1 s poll is the floor (the library's idle poll runs at most every
// 1 s too).
//
// Argument (JSON): { url, recordStarts?, batch? (default 100; --raw-batch, for diagnostics) }

const pg = require('pg');
const raw = require('./raw-sql.cjs');
const { now, serve, roleArgs, sampleRss, fail } = require('./role-common.cjs');

const args = roleArgs();
const BATCH = args.batch ?? 100;
const rss = sampleRss(500);
const stats = { handled: 0, firstStart: 0, lastStart: 0, claims: 0 };
const starts = [];

async function handle(row) {
  const t = now();
  if (stats.handled++ === 0) stats.firstStart = t;
  stats.lastStart = t;
  if (args.recordStarts) starts.push([row.id, t]);
}

async function main() {
  const db = new pg.Client({ connectionString: args.url, application_name: 'bench-raw-worker' });
  const listener = new pg.Client({ connectionString: args.url, application_name: 'bench-raw-worker:listen' });
  await db.connect();
  await listener.connect();

  let busy = false;
  let again = false;
  let stopping = false;
  const loop = async () => {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      do {
        again = false;
        while (!stopping) {
          const { rows } = await db.query(raw.claim, ['bench', BATCH]);
          stats.claims++;
          if (rows.length === 0) break;
          await Promise.all(rows.map(handle));
          await db.query(raw.remove, [rows.map((r) => r.id)]);
          if (rows.length < BATCH) break;
        }
      } while (again && !stopping);
    } finally {
      busy = false;
    }
  };
  const kick = () => loop().catch(fail);
  listener.on('notification', kick);
  await listener.query(`LISTEN ${raw.CHANNEL}`);
  setInterval(kick, 1000).unref();
  kick();

  serve({
    progress: () => ({ handled: stats.handled }),
    report: () => ({ ...stats, starts, rss, cpu: process.cpuUsage() }),
    stop: async () => {
      stopping = true;
      while (busy) await new Promise((r) => setTimeout(r, 5));
      await Promise.all([db.end(), listener.end()]);
      process.exit(0);
    },
  });
  process.send({ type: 'ready', pid: process.pid });
}

main().catch((err) => {
  process.stderr.write(`bench raw-worker: boot failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
