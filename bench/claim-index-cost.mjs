// What the claim's index entries cost, and which index each reader of active rows uses (issue 13).
// The claim moves a row from 'waiting' to 'active': state is in the partial indexes' predicates,
// so the update is never HOT and writes an entry into every index whose predicate the new row
// matches: the primary key and jobs_active_idx (queue, locked_until) WHERE state = 'active'.
//
//   npm run build && DATABASE_URL=postgres://... node bench/claim-index-cost.mjs [--claims=1500] [--limit=10]
//
// 1. Readers: on a realistic table (200 queues, 100,000 waiting, 5,042 active of which 42 with an
//    expired or no lease, 60,000 dead entries left by finished jobs and not yet vacuumed), the
//    plan of every statement that reads active rows: the indexes it scans, shared buffers, time.
// 2. Cost: the library's claim of --limit rows, --claims times on a table with jobs_active_idx
//    and on one without it (rescue and the counts need it; this only prices its entry),
//    interleaved in blocks; medians per claim of EXPLAIN (ANALYZE, BUFFERS, WAL).
// Each part runs in its own fresh databases, dropped at the end. Prints markdown tables.

import { createRequire } from 'node:module';
import pg from 'pg';

const require = createRequire(import.meta.url);
const { schemaSql } = require('../dist/db/store-context.js');
const { claimStatements } = require('../dist/db/claim.js');
const { limitedClaimStatements } = require('../dist/db/claim-limited.js');
const { runningStatements } = require('../dist/db/running.js');
const { maintenanceStatements } = require('../dist/db/maintenance.js');
const { readStatements } = require('../dist/db/reads.js');
const { buildDashboardQueries } = require('../dist/db/dashboard-queries.js');
const { migrate } = require('../dist/db/migrator.js');

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, '').split('=');
    return [k, v ?? 'true'];
  }),
);
const CLAIMS = Number(args.claims ?? 1500);
const LIMIT = Number(args.limit ?? 10);
const BLOCKS = 6;
const base = process.env.DATABASE_URL;
if (!base) throw new Error('set DATABASE_URL to a server where this role may CREATE DATABASE');
const SCHEMA = 'pgqueue';
const J = `${SCHEMA}.jobs`;
const sql = schemaSql(SCHEMA);
const q = {
  ...claimStatements(sql),
  ...limitedClaimStatements(sql),
  ...runningStatements(sql),
  ...maintenanceStatements(sql),
  ...readStatements(SCHEMA),
};
const dq = buildDashboardQueries(SCHEMA);

function dbUrl(name) {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

async function freshDb(admin, name) {
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  const pool = new pg.Pool({ connectionString: dbUrl(name), max: 1 });
  await migrate(pool, SCHEMA);
  await pool.end();
  const c = new pg.Client({ connectionString: dbUrl(name) });
  await c.connect();
  return c;
}

/** Plan figures of one statement: the indexes its scans read, buffers, execution time. */
async function explain(c, sql, params, { rollback = false } = {}) {
  if (rollback) await c.query('BEGIN');
  try {
    const { rows } = await c.query(`EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) ${sql}`, params);
    const plan = rows[0]['QUERY PLAN'][0];
    const indexes = new Set();
    const seq = new Set();
    const walk = (n) => {
      if (n['Index Name']) indexes.add(n['Index Name']);
      if (n['Node Type'] === 'Seq Scan') seq.add(n['Relation Name']);
      for (const k of n.Plans ?? []) walk(k);
    };
    walk(plan.Plan);
    return {
      ms: plan['Execution Time'],
      hit: plan.Plan['Shared Hit Blocks'] + (plan.Plan['Shared Read Blocks'] ?? 0),
      wal: plan.Plan['WAL Bytes'] ?? 0,
      walRecords: plan.Plan['WAL Records'] ?? 0,
      indexes: [...indexes].join(', ') || '-',
      seq: [...seq].join(', ') || '-',
    };
  } finally {
    if (rollback) await c.query('ROLLBACK');
  }
}

async function readers(admin) {
  const c = await freshDb(admin, 'claimcost_readers');
  try {
    await c.query(`ALTER TABLE ${J} SET (autovacuum_enabled = false)`);
    await c.query(
      `INSERT INTO ${J} (queue, name, payload) SELECT 'queue-' || (g % 200), 'n', '{"x":1}' FROM generate_series(1, 100000) g`,
    );
    // The backlog as autovacuum leaves it (all-visible), so the waiting half of the counts
    // is index-only and the figures below are those of the active rows.
    await c.query(`VACUUM ${J}`);
    // Finished jobs: claimed, then deleted by their outcome; their entries stay until vacuum.
    await c.query(
      `INSERT INTO ${J} (queue, name, payload, state, locked_by, locked_until, started_at)
       SELECT 'queue-' || (g % 200), 'n', '{"x":1}', 'active', 'w-' || (g % 20),
              now() - interval '1 minute' + (g % 600) * interval '1 second', now() FROM generate_series(1, 60000) g`,
    );
    await c.query(`DELETE FROM ${J} WHERE state = 'active'`);
    await c.query(
      `INSERT INTO ${J} (queue, name, payload, state, locked_by, locked_until, started_at)
       SELECT 'queue-' || (g % 200), 'n', '{"x":1}', 'active', 'w-' || (g % 20),
              now() + interval '30 seconds' + (g % 30) * interval '1 second', now() FROM generate_series(1, 5000) g`,
    );
    await c.query(
      `INSERT INTO ${J} (queue, name, payload, state, locked_by, locked_until, started_at)
       SELECT 'queue-' || (g % 200), 'n', '{"x":1}', 'active', 'w-dead', now() - interval '5 minutes', now() FROM generate_series(1, 40) g`,
    );
    await c.query(
      `INSERT INTO ${J} (queue, name, payload, state) VALUES ('queue-7', 'n', '{}', 'active'), ('queue-9', 'n', '{}', 'active')`,
    );
    await c.query(`ANALYZE ${J}`);
    await c.query(
      `INSERT INTO ${SCHEMA}.nodes (id, host, pid, started_at, heartbeat_ms)
       SELECT 'w-' || g, 'h', g, now(), 1000 FROM generate_series(0, 19) g`,
    );
    const ids = (await c.query(`SELECT array_agg(id) AS ids FROM ${J} WHERE state = 'active' AND locked_by = 'w-3'`)).rows[0].ids;
    const cases = [
      ['rescue (all queues, expired or no lease)', q.rescue, [100, 'claimcost'], true],
      ['counts, all queues (health, metrics)', q.counts, [null], false],
      ['counts, one queue', q.counts, ['queue-7'], false],
      ['limitState (globalConcurrency count)', q.limitState, ['queue-7', null], false],
      ['dashboard nodes (running per node)', dq.nodes, [], false],
      ['heartbeat (lease renewal, 250 jobs)', q.heartbeat, [ids, 'w-3', 30000, 'h', 1, new Date(), 1000, '[]'], true],
      ['handBack (shutdown, 250 jobs)', q.handBack, [ids, 'w-3', 'claimcost'], true],
    ];
    console.log('\n| statement | indexes read | seq scans | shared buffers | ms |\n| --- | --- | --- | --- | --- |');
    for (const [label, sql, params, rollback] of cases) {
      const r = await explain(c, sql, params, { rollback });
      console.log(`| ${label} | ${r.indexes} | ${r.seq} | ${r.hit} | ${r.ms.toFixed(2)} |`);
    }
  } finally {
    await c.end();
    await admin.query('DROP DATABASE IF EXISTS claimcost_readers');
  }
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

async function cost(admin) {
  const dbs = [];
  for (const [name, dropActive] of [
    ['claimcost_with', false],
    ['claimcost_without', true],
  ]) {
    const c = await freshDb(admin, name);
    await c.query(
      `INSERT INTO ${J} (queue, name, payload) SELECT 'q-' || (g % 50), 'n', '{"x":1}' FROM generate_series(1, 50000) g`,
    );
    await c.query(`INSERT INTO ${J} (queue, name, payload) SELECT 'q', 'n', '{"x":1}' FROM generate_series(1, $1) g`, [
      CLAIMS * LIMIT,
    ]);
    if (dropActive) await c.query(`DROP INDEX ${SCHEMA}.jobs_active_idx`);
    await c.query(`VACUUM ANALYZE ${J}`);
    dbs.push({ name, c, ms: [], hit: [], wal: [], walRecords: [] });
  }
  try {
    const per = Math.ceil(CLAIMS / BLOCKS);
    for (let b = 0; b < BLOCKS; b++) {
      for (const d of b % 2 ? [...dbs].reverse() : dbs) {
        for (let i = 0; i < per; i++) {
          const r = await explain(d.c, q.claim, ['q', LIMIT, 'bench:claimcost', 30000]);
          for (const k of ['ms', 'hit', 'wal', 'walRecords']) d[k].push(r[k]);
        }
      }
    }
    console.log(`\nclaim of ${LIMIT} rows, ${BLOCKS} interleaved blocks, medians per claim`);
    console.log(
      '| jobs table | claims | execution ms | shared buffers | WAL bytes | WAL records |\n| --- | --- | --- | --- | --- | --- |',
    );
    for (const d of dbs) {
      console.log(
        `| ${d.name === 'claimcost_with' ? 'with jobs_active_idx (as shipped)' : 'without jobs_active_idx'} | ${d.ms.length} | ` +
          `${median(d.ms).toFixed(4)} | ${median(d.hit)} | ${median(d.wal)} | ${median(d.walRecords)} |`,
      );
    }
  } finally {
    for (const d of dbs) {
      await d.c.end();
      await admin.query(`DROP DATABASE IF EXISTS ${d.name}`);
    }
  }
}

const admin = new pg.Client({ connectionString: base });
await admin.connect();
try {
  await readers(admin);
  await cost(admin);
} finally {
  await admin.end();
}
