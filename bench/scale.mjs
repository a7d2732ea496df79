// Workload 7, scale: N library worker processes (each with the default pool of 4 and concurrency
// 10) drain a preloaded backlog of no-op jobs, straight to PostgreSQL or through PgBouncer in
// transaction mode (`preparedStatements: false`, LISTEN on a direct `listenConnection`).
//
// The start, the same on both paths: the workers boot on an empty table; the backlog is then
// inserted (and analysed) in one transaction that holds the table in SHARE mode and sends a
// NOTIFY, so polls that come meanwhile wait, and its commit wakes every worker at once. (drain()'s
// gate, the table locked while the workers boot, would deadlock through PgBouncer: the first
// claims, blocked on the lock, hold every server connection of the pool, and the later workers'
// boot statements wait behind them.) Unlike drain(), the backlog is not vacuumed before the
// start; the first readers set its hint bits, on both paths alike.
//
// Besides drain()'s figures: server connections of the database (sampled every 100 ms, the
// bench's own left out), backends waiting on a lock (same samples), claim statements per second
// (pg_stat_statements, loaded on the embedded server for this workload) and, through PgBouncer,
// its pool size.

import pg from 'pg';
import { startPgBouncer } from '../scripts/pgbouncer.mjs';
import { LIB_PRELOAD } from './workloads.mjs';
import { committedXacts, counters, cpuSeconds, now, sleep, startRoles, usage, waitEmpty, withDatabase } from './harness.mjs';

const TABLE = 'pgqueue.jobs';
const CHANNEL = 'pgqueue_jobs';

/** Starts the PgBouncer the bouncer runs share (one per bench run). */
export function startBouncer(serverUrl, poolSize) {
  return startPgBouncer({ serverUrl, poolSize });
}

/** Server-side sampling during the drain: connections of the database and lock waiters. */
function sampler(url) {
  const c = new pg.Client({ connectionString: url, application_name: 'bench-sampler' });
  let on = true;
  const s = { samples: 0, maxConnections: 0, lockWaitSum: 0, maxLockWaits: 0 };
  const done = (async () => {
    await c.connect();
    while (on) {
      const { rows } = await c.query(`
        SELECT count(*)::int AS conns, count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS waits
        FROM pg_stat_activity
        WHERE datname = current_database() AND backend_type = 'client backend' AND application_name NOT LIKE 'bench-%'`);
      s.samples++;
      s.maxConnections = Math.max(s.maxConnections, rows[0].conns);
      s.lockWaitSum += rows[0].waits;
      s.maxLockWaits = Math.max(s.maxLockWaits, rows[0].waits);
      await sleep(100);
    }
    await c.end();
  })();
  return {
    async stop() {
      on = false;
      await done;
      return {
        maxConnections: s.maxConnections,
        meanLockWaits: s.samples ? s.lockWaitSum / s.samples : 0,
        maxLockWaits: s.maxLockWaits,
      };
    },
  };
}

async function claimCalls(client) {
  const { rows } = await client.query(`
    SELECT coalesce(sum(calls), 0)::bigint AS n FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND query LIKE '%attempt = least(%' AND query LIKE '%SKIP LOCKED%'`);
  return Number(rows[0].n);
}

async function bouncerAdmin(bouncer, sql) {
  const c = new pg.Client({ connectionString: bouncer.adminUrl });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

/**
 * One scale run. `bouncer`: the PgBouncer to go through, or null for direct. Returns drain()'s
 * shape: { metrics, check }.
 */
export function scale(ctx, { processes, jobs, bouncer }) {
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const workerUrl = bouncer ? bouncer.urlFor(url) : url;
    const libOptions = bouncer ? { ...ctx.libOptions, preparedStatements: false, listenConnection: url } : ctx.libOptions;
    const spec = ['lib-worker.cjs', { url: workerUrl, concurrency: 10, libOptions }];
    // The schema first, as an app's first boot makes it.
    const [setup] = await startRoles([['lib-producer.cjs', { url, libOptions: ctx.libOptions }]]);
    await setup.stop();

    let roles = [];
    let gate = null;
    try {
      // Every worker boots on the empty table and idles (polls, LISTEN). The backlog then goes in
      // in one transaction that also holds the table in SHARE mode, so a poll that looks meanwhile
      // waits, and its NOTIFY wakes the others at its commit: the start of the clock.
      roles = await startRoles(Array.from({ length: processes }, () => spec));
      gate = new pg.Client({ connectionString: url, application_name: 'bench-gate' });
      await gate.connect();
      await gate.query('BEGIN');
      await gate.query(`LOCK TABLE ${TABLE} IN SHARE MODE`);
      await gate.query(LIB_PRELOAD, [jobs]);
      await gate.query(`ANALYZE ${TABLE}`);
      await gate.query(`SELECT pg_notify($1, 'bench|0')`, [CHANNEL]);
      await client.query('CHECKPOINT');
      const start = async () => {
        await gate.query('COMMIT');
        await gate.end();
        gate = null;
      };
      await client.query('SELECT pg_stat_statements_reset()');
      const xBefore = await committedXacts(url);
      const a = await counters(
        client,
        roles.map((r) => r.pid),
      );
      const server = sampler(url);
      const bouncerCpu0 = bouncer ? cpuSeconds(bouncer.pid) : null;
      const t0 = now();
      await start();
      const startedAll = async () =>
        (await Promise.all(roles.map((r) => r.request({ type: 'progress' })))).reduce((n, m) => n + m.handled, 0) >= jobs;
      const done = await waitEmpty(url, TABLE, Math.max(120_000, jobs * 2), { startedAll });
      const b = await counters(
        client,
        roles.map((r) => r.pid),
      );
      const bouncerCpuS = bouncer && bouncerCpu0 !== null ? cpuSeconds(bouncer.pid) - bouncerCpu0 : null;
      const seen = await server.stop();
      const claims = await claimCalls(client);
      const pool = bouncer ? (await bouncerAdmin(bouncer, 'SHOW POOLS')).find((p) => p.database === ctx.dbName) : null;
      const reports = (await Promise.all(roles.map((r) => r.request({ type: 'report' })))).map(
        ({ starts: _s, rss: _r, ...r }) => r,
      );
      await Promise.all(roles.map((r) => r.stop()));
      const use = await usage(client, a, b, jobs);
      const xacts = (await committedXacts(url)) - xBefore - done.polls;
      const handled = reports.reduce((s, r) => s + r.handled, 0);
      const { rows } = await client.query(
        `SELECT count(*)::int AS n, count(DISTINCT (payload->>'i'))::int AS distinct_jobs, max(attempt)::int AS max_attempt
         FROM pgqueue.job_history WHERE state = 'completed'`,
      );
      const { rows: failed } = await client.query(
        `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE state <> 'completed'`,
      );
      const wallMs = done.at - t0;
      const h = rows[0];
      const ok =
        handled === jobs &&
        h.n === jobs &&
        h.distinct_jobs === jobs &&
        h.max_attempt === 1 &&
        failed[0].n === 0 &&
        (!bouncer || seen.maxConnections <= bouncer.poolSize + processes); // pool + one direct LISTEN per process
      return {
        metrics: {
          rate: (jobs * 1000) / wallMs,
          wallMs,
          ...use,
          xactsPer100: (100 * xacts) / jobs,
          claimsPerS: (claims * 1000) / wallMs,
          jobsPerClaim: claims ? jobs / claims : null,
          serverConnections: seen.maxConnections,
          meanLockWaits: seen.meanLockWaits,
          maxLockWaits: seen.maxLockWaits,
          poolSize: bouncer ? bouncer.poolSize : null,
          bouncerCpuPct: bouncerCpuS === null ? null : Math.round((100 * bouncerCpuS * 1000) / (b.t - a.t)),
          bouncerMaxWaitS: pool ? Number(pool.maxwait) : null,
          perProcess: reports.map((r) => r.handled),
        },
        check: {
          ok,
          detail:
            `${handled} handler runs, ${h.n} completions (${h.distinct_jobs} distinct, max attempt ${h.max_attempt}), ` +
            `${failed[0].n} failed, for ${jobs} jobs; at most ${seen.maxConnections} server connections` +
            (bouncer ? ` (pool ${bouncer.poolSize} + ${processes} direct LISTEN)` : ''),
        },
      };
    } finally {
      await gate?.end().catch(() => undefined);
      await Promise.all(roles.map((r) => r.stop(2000)));
      // PgBouncer keeps its server connections to the database; the DROP ... WITH (FORCE) that
      // follows ends them, and PgBouncer forgets them.
    }
  });
}

const median = (xs) => {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};

/** The scale table (medians over repetitions) and the target's verdict. */
export function scaleTable(runs, { processes, jobs, poolSize, judge }) {
  const fig = (key, name) => median((runs[key] ?? []).map((r) => r.metrics[name]));
  const sum = (key, name) => median((runs[key] ?? []).map((r) => (r.metrics[name] ?? []).reduce((a, b) => a + (b ?? 0), 0)));
  const n = (x, d = 0) => (x == null ? '-' : d ? x.toFixed(d) : Math.round(x).toLocaleString('en-US'));
  const lines = [
    `Scale: ${jobs.toLocaleString('en-US')} no-op jobs drained by N worker processes (each: default pool of 4, concurrency 10); ` +
      `through PgBouncer 1.18 in transaction mode, pool size ${poolSize}, preparedStatements: false, LISTEN direct.`,
    '',
    '| processes | path | jobs/s | vs best direct | PostgreSQL CPU (% of one core) | workers CPU | PgBouncer CPU | machine busy | server connections (max) | claims/s | jobs per claim | lock waiters (mean / max) | tx/100 jobs |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  const best = Math.max(...processes.map((p) => fig(`scale/direct-${p}p`, 'rate') ?? 0));
  const rows = [];
  for (const p of processes) {
    for (const path of ['direct', 'pgbouncer']) {
      const key = `scale/${path}-${p}p`;
      const rate = fig(key, 'rate');
      if (rate == null) continue;
      rows.push({ processes: p, path, rate, share: best ? rate / best : null });
      lines.push(
        `| ${p} | ${path} | ${n(rate)} | ${best ? `${((100 * rate) / best).toFixed(0)}%` : '-'} | ${n(fig(key, 'postgresCpuPct'))}% | ${n(sum(key, 'workerCpuPct'))}% | ${path === 'direct' ? '-' : `${n(fig(key, 'bouncerCpuPct'))}%`} | ` +
          `${n(fig(key, 'machineBusyPct'))}% | ${n(fig(key, 'serverConnections'))} | ${n(fig(key, 'claimsPerS'))} | ${n(fig(key, 'jobsPerClaim'), 1)} | ` +
          `${n(fig(key, 'meanLockWaits'), 2)} / ${n(fig(key, 'maxLockWaits'))} | ${n(fig(key, 'xactsPer100'), 1)} |`,
      );
    }
  }
  const top = Math.max(...processes);
  const through = fig(`scale/pgbouncer-${top}p`, 'rate');
  let verdict = '';
  if (through != null && best) {
    const ok = through >= 0.9 * best;
    verdict =
      `\nTarget: ${top} processes through PgBouncer >= 90% of the best direct figure (${n(best)} jobs/s): ` +
      `${((100 * through) / best).toFixed(0)}%, ${!judge ? 'not judged (smoke)' : ok ? 'met' : '**missed**'}.`;
  }
  return { rows, best, markdown: lines.join('\n') + verdict, met: through == null || !best ? null : through >= 0.9 * best };
}
