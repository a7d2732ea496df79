// One function per kind of run (enqueue, drain, latency). Each runs in a fresh database with its
// roles in their own processes, and returns { metrics, check } where `check` says whether every
// job was accounted for (the only thing the smoke mode asserts).

import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import {
  committedXacts,
  counters,
  lockTable,
  now,
  percentiles,
  sleep,
  startRoles,
  usage,
  waitEmpty,
  withDatabase,
} from './harness.mjs';

const require = createRequire(import.meta.url);
const raw = require('./raw-sql.cjs');

const LIB_TABLE = 'pgqueue.jobs';
/** graphile-worker's jobs table (bench/gw-common.cjs; not loaded here, so a run without it needs no module). */
const GW_TABLE = 'graphile_worker._private_jobs';

/** Per kind of run: the jobs table, and the role scripts. */
const KINDS = {
  lib: { table: LIB_TABLE, producer: 'lib-producer.cjs', worker: 'lib-worker.cjs' },
  raw: { table: raw.TABLE, producer: 'raw-producer.cjs', worker: 'raw-worker.cjs' },
  gw: { table: GW_TABLE, producer: 'gw-producer.cjs', worker: 'gw-worker.cjs' },
};

/** The worker role's argument for a kind (the raw loop's shape comes from --raw-batch / --raw-loops). */
function workerArg(kind, url, ctx, extra = {}) {
  if (kind === 'lib') return { url, concurrency: 10, libOptions: ctx.libOptions, dist: ctx.dist, ...extra };
  if (kind === 'raw') return { url, batch: ctx.rawBatch, loops: extra.loops ?? ctx.rawLoops, ...extra };
  return { url, ...extra };
}

/**
 * A backlog inserted directly, with the column values QueueService.add stores: backoff NULL
 * (add stores the built-in default as NULL, "the queue's default": lib/producer/enqueue.ts).
 * Until issue 13 the preload stored the default's JSON instead, which the claim then returned
 * and parsed on every row, as no job added through the API does.
 */
export const LIB_PRELOAD = `
  INSERT INTO pgqueue.jobs (queue, name, payload, priority, run_at, max_attempts, backoff, timeout_ms)
  SELECT 'bench', 'noop', jsonb_build_object('i', g), 0, now(), 3, NULL, NULL
  FROM generate_series(1, $1) AS g`;

/** $1 rows of completed history, finished over the last 23 hours (inside the default 1-day retention). */
const LIB_HISTORY = `
  INSERT INTO pgqueue.job_history (id, queue, name, payload, state, priority, run_at, attempt, max_attempts,
                                   backoff, timeout_ms, errors, result, created_at, started_at, finished_at)
  SELECT g, 'bench', 'noop', jsonb_build_object('i', g), 'completed', 0, t, 1, 3, NULL, NULL, '[]', NULL,
         t, t, t + interval '5 milliseconds'
  FROM generate_series(1, $1) AS g,
       LATERAL (SELECT now() - (($1 - g) * (82800000.0 / $1)) * interval '1 millisecond') AS x(t)`;

/**
 * The day partitions the history spans (yesterday and today), as the maintenance pass of a node
 * running then would have made them: else the preloaded rows would sit in the default partition
 * and the worker's first pass would move today's into a new partition during the timed drain.
 */
async function historyPartitions(url) {
  const { HistoryPartitions } = require('../dist/db/history/partitions.js');
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const parts = new HistoryPartitions(pool, 'pgqueue', 86_400_000);
    const at = Number((await pool.query('SELECT extract(epoch FROM now())::float8 * 1000 AS n')).rows[0].n);
    await parts.runOnce(365 * 86_400_000, at - 86_400_000);
    await parts.runOnce(365 * 86_400_000, at);
  } finally {
    await pool.end();
  }
}

/** Creates the library's schema the way an app does: booting it (migrate: true). */
async function migrateLib(url, ctx) {
  const [setup] = await startRoles([['lib-producer.cjs', { url, libOptions: ctx.libOptions, dist: ctx.dist }]]);
  await setup.stop();
}

async function resetStatements(client, ctx) {
  if (!ctx.pgss) return;
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await client.query('SELECT pg_stat_statements_reset()');
}

/**
 * With --pgss: the statements of this database, most total time first (calls, plans, rows and
 * shared buffers per call: figures other load on the machine does not move).
 */
async function topStatements(client, ctx) {
  if (!ctx.pgss) return undefined;
  const { rows } = await client.query(`
    SELECT calls::int, plans::int, round((rows::numeric / greatest(calls, 1)), 1)::float AS rows_per_call,
           round(mean_exec_time::numeric, 3)::float AS mean_ms, round(mean_plan_time::numeric, 3)::float AS plan_ms,
           round(total_exec_time::numeric)::int AS total_ms,
           round((shared_blks_hit + shared_blks_read)::numeric / greatest(calls, 1), 1)::float AS buffers_per_call,
           left(regexp_replace(query, '\\s+', ' ', 'g'), 120) AS query
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    ORDER BY total_exec_time DESC LIMIT 8`);
  return rows;
}

function check(ok, detail) {
  return { ok, detail };
}

/** Workloads 1-2: a producer process enqueues `total` jobs; jobs/s from its own clock. */
export function enqueue(ctx, { kind, mode, total, callers = 10, batch = 1000 }) {
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    if (kind === 'raw') await client.query(raw.schema);
    const [producer] = await startRoles([[KINDS[kind].producer, { url, libOptions: ctx.libOptions, dist: ctx.dist }]]);
    try {
      await client.query('CHECKPOINT');
      await resetStatements(client, ctx);
      const a = await counters(client, [producer.pid]);
      const r = await producer.request({ type: 'go', mode, total, callers, batch });
      const b = await counters(client, [producer.pid]);
      const use = await usage(client, a, b, total);
      const statements = await topStatements(client, ctx);
      await producer.stop();
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM ${KINDS[kind].table}`);
      return {
        metrics: { rate: (total * 1000) / r.elapsedMs, ...use, statements },
        check: check(rows[0].n === total, `${rows[0].n} of ${total} jobs stored`),
      };
    } finally {
      await producer.stop(2000);
    }
  });
}

/**
 * Workloads 3, 5, 6: `processes` worker processes drain a preloaded backlog of `jobs`. They boot
 * while the table is locked, so all start on the same instant; the clock runs from that instant
 * until a poll finds the table empty (every outcome committed).
 */
export function drain(ctx, { kind, processes = 1, jobs, history = 0, dashboard = null, loops }) {
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    const table = KINDS[kind].table;
    if (kind === 'gw') {
      const [setup] = await startRoles([['gw-producer.cjs', { url }]]);
      await setup.stop();
      await client.query(require('./gw-common.cjs').preload, [jobs]);
      await client.query(`VACUUM ANALYZE ${GW_TABLE}`);
    } else if (kind === 'lib') {
      await migrateLib(url, ctx);
      if (history) {
        await historyPartitions(url);
        await client.query(LIB_HISTORY, [history]);
        // New jobs take ids after the history's, as they would have in a live system.
        await client.query(`ALTER TABLE pgqueue.jobs ALTER COLUMN id RESTART WITH ${history + 1}`);
      }
      await client.query(LIB_PRELOAD, [jobs]);
      await client.query('VACUUM ANALYZE pgqueue.jobs, pgqueue.job_history');
    } else {
      await client.query(raw.schema);
      await client.query(raw.preload, [jobs]);
      await client.query(`VACUUM ANALYZE ${raw.TABLE}`);
    }
    await client.query('CHECKPOINT');
    await resetStatements(client, ctx);

    const gate = await lockTable(url, table);
    let roles = [];
    try {
      const spec = [
        KINDS[kind].worker,
        workerArg(kind, url, ctx, kind === 'lib' ? { dashboard: !!dashboard } : kind === 'raw' && loops ? { loops } : {}),
      ];
      roles = await startRoles(Array.from({ length: processes }, () => spec));
      const gateDeadline = now() + 10_000;
      while ((await gate.waiters()) < processes && now() < gateDeadline) await sleep(20);
      const xBefore = await committedXacts(url);
      const a = await counters(
        client,
        roles.map((r) => r.pid),
      );
      const dashUrl = dashboard?.open ? (await roles[0].request({ type: 'dashboard' })).url : null;
      // The pages were open before the drain began, as an operator's would be: their first poll
      // (the one after the app's boot, which counts the whole hour's throughput once) is answered
      // before the clock starts, and reported apart (firstPollMs).
      const firstPollMs = dashUrl ? await pollOnce(dashUrl) : null;
      const t0 = now();
      await gate.open();
      const poller = dashUrl ? pollDashboard(dashUrl, dashboard.everyMs ?? DASHBOARD_REFRESH_MS) : null;
      const startedAll = async () =>
        (await Promise.all(roles.map((r) => r.request({ type: 'progress' })))).reduce((n, m) => n + m.handled, 0) >= jobs;
      const done = await waitEmpty(url, table, Math.max(120_000, jobs * 2), { startedAll }).finally(() => poller?.stop());
      const polled = poller ? await poller.done : null;
      const b = await counters(
        client,
        roles.map((r) => r.pid),
      );
      const reports = (await Promise.all(roles.map((r) => r.request({ type: 'report' })))).map(
        ({ starts: _starts, trace, ...r }) => ({ ...r, trace: traceAround(trace, t0) }),
      );
      await Promise.all(roles.map((r) => r.stop()));
      const use = await usage(client, a, b, jobs);
      const xacts = (await committedXacts(url)) - xBefore - done.polls;
      const statements = await topStatements(client, ctx);

      const handled = reports.reduce((s, r) => s + r.handled, 0);
      let stored = handled; // raw, gw, and lib without history: the table is empty, so every job was deleted
      if (kind === 'lib' && ctx.libOptions?.retention?.completedMs !== 0) {
        const { rows } = await client.query(
          `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE state = 'completed' AND id > $1`,
          [history],
        );
        stored = rows[0].n;
      }
      const wallMs = done.at - t0;
      return {
        metrics: {
          rate: (jobs * 1000) / wallMs,
          wallMs,
          firstStartMs: Math.min(...reports.map((r) => r.firstStart)) - t0,
          ...rampFigures(reports, t0, done.at, jobs),
          ...use,
          xactsPer100: (100 * xacts) / jobs,
          perProcess: reports.map((r) => r.handled),
          ...rssFigures(reports[0].rss, t0, done.at),
          ...(polled
            ? { polls: polled.polls, pollP50: polled.p(50), pollP95: polled.p(95), pollMax: polled.p(100), firstPollMs }
            : {}),
          statements,
          ...(reports[0].trace ? { trace: reports[0].trace } : {}),
        },
        check: check(
          handled === jobs && stored === jobs,
          `${handled} handler runs and ${stored} completions recorded for ${jobs} jobs`,
        ),
      };
    } finally {
      await gate.open().catch(() => undefined);
      await Promise.all(roles.map((r) => r.stop(2000)));
    }
  });
}

/**
 * The first second of a drain, from the workers' handler starts per 10 ms (role-common.cjs):
 * jobs started in the first second; the steady rate (the middle half of the jobs: from the 25th
 * to the 75th percentile start); the time to full speed (the first 50 ms window, from the start,
 * whose rate reaches 90 % of the steady rate); and the ramp's cost: the drain's wall time minus
 * what the whole drain takes at the steady rate.
 */
export function rampFigures(reports, t0, t1, jobs) {
  const counts = new Map();
  for (const r of reports) for (const [b, n] of r.buckets ?? []) counts.set(b, (counts.get(b) ?? 0) + n);
  if (counts.size === 0) return {};
  const first = Math.floor(t0 / 10);
  const last = Math.floor(t1 / 10);
  const series = [];
  for (let b = first; b <= last; b++) series.push(counts.get(b) ?? 0);
  const total = series.reduce((a, b) => a + b, 0);
  const at = (share) => {
    let sum = 0;
    for (let i = 0; i < series.length; i++) if ((sum += series[i]) >= share * total) return i;
    return series.length - 1;
  };
  const [q1, q3] = [at(0.25), at(0.75)];
  const steadyPerMs = (series.slice(q1, q3 + 1).reduce((a, b) => a + b, 0) || 1) / (10 * (q3 - q1 + 1));
  let fullSpeedMs = null;
  for (let i = 0; i + 5 <= series.length; i++) {
    const w = series[i] + series[i + 1] + series[i + 2] + series[i + 3] + series[i + 4];
    if (w / 50 >= 0.9 * steadyPerMs) {
      fullSpeedMs = i * 10 + (first * 10 - t0);
      break;
    }
  }
  const firstSecond = series.slice(0, 100).reduce((a, b) => a + b, 0);
  return {
    firstSecondJobs: firstSecond,
    steadyRate: steadyPerMs * 1000,
    fullSpeedMs,
    rampCostMs: t1 - t0 - jobs / steadyPerMs,
  };
}

/** BENCH_TRACE: a worker's statements and connects from `t0` to `untilMs` after it, times relative to `t0`. */
function traceAround(trace, t0, untilMs = 1000) {
  if (!trace || trace.length === 0) return undefined;
  return trace
    .filter(([t]) => t < t0 + untilMs)
    .sort((a, b) => a[0] - b[0])
    .map(([t, ms, rows, label]) => [Math.round((t - t0) * 10) / 10, Math.round(ms * 10) / 10, rows, label]);
}

/** How often the dashboard's pages poll by default (DASHBOARD_DEFAULTS.refreshIntervalMs). */
const DASHBOARD_REFRESH_MS = require('../dist/dashboard').DASHBOARD_DEFAULTS.refreshIntervalMs;

/** One poll of an open overview page and an open queue page (three GETs at once); answers its duration in ms. */
async function pollOnce(base) {
  const get = async (p) => {
    const res = await fetch(`${base}/api${p}`);
    if (!res.ok) throw new Error(`dashboard GET ${p}: ${res.status} ${await res.text()}`);
    await res.json();
  };
  const s = now();
  await Promise.all([get('/overview'), get('/queues/bench'), get('/queues/bench/jobs?state=waiting')]);
  return now() - s;
}

/**
 * What an open overview page and an open queue page ask the dashboard, every `everyMs` from now
 * on, as the pages' own timers do (the next poll starts `everyMs` after the previous one ended):
 * GET api/overview, and GET api/queues/bench with its first waiting page, at once. `stop()` ends
 * the loop; `done` resolves with the poll count and the percentiles of a poll's duration (ms).
 */
function pollDashboard(base, everyMs) {
  const ms = [];
  let stopped = false;
  let wake = () => undefined;
  const done = (async () => {
    while (!stopped) {
      ms.push(await pollOnce(base));
      await new Promise((r) => {
        const timer = setTimeout(r, everyMs);
        wake = () => (clearTimeout(timer), r());
      });
    }
    return { polls: ms.length, p: percentiles(ms) };
  })();
  return {
    done,
    stop() {
      stopped = true;
      wake();
    },
  };
}

/**
 * RSS of the first worker during a drain: after warm-up (the first sample past 20 % of the drain
 * time), at the end, and the largest deviation from the warm-up value after it.
 */
function rssFigures(samples, t0, t1) {
  const during = samples.filter(([t]) => t >= t0 && t <= t1);
  if (during.length < 3) return {};
  const warmAt = t0 + 0.2 * (t1 - t0);
  const after = during.filter(([t]) => t >= warmAt);
  if (after.length < 2) return {};
  const warm = after[0][1];
  const end = after[after.length - 1][1];
  const maxDev = Math.max(...after.map(([, v]) => Math.abs(v - warm) / warm));
  const mb = (b) => Math.round(b / 2 ** 17) / 8;
  // About one point a second for the JSON: [s since the start, RSS MB, V8 heap used MB].
  const every = Math.max(1, Math.round(during.length / Math.max(1, (t1 - t0) / 1000)));
  const timeline = during.filter((_, i) => i % every === 0).map(([t, r, h]) => [Math.round((t - t0) / 100) / 10, mb(r), mb(h)]);
  return {
    rssWarmMB: warm / 2 ** 20,
    rssEndMB: end / 2 ** 20,
    rssMaxDevPct: 100 * maxDev,
    rssSamples: after.length,
    rssTimeline: timeline,
  };
}

/**
 * Workload 4: an idle worker; a producer enqueues `rate` jobs/s one at a time for `seconds`,
 * open loop. Latency = handler start (worker process) - commit acknowledged (producer process).
 */
export function latency(ctx, { kind, rate, seconds }) {
  const total = Math.round(rate * seconds);
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    if (kind === 'raw') await client.query(raw.schema);
    if (kind === 'gw') {
      // graphile-worker's run() expects its schema: the producer's boot migrates it.
      const [setup] = await startRoles([['gw-producer.cjs', { url }]]);
      await setup.stop();
    }
    const table = KINDS[kind].table;
    let roles = [];
    try {
      // The worker first: booting it migrates (lib), so the producer finds the schema ready.
      roles = await startRoles([[KINDS[kind].worker, workerArg(kind, url, ctx, { recordStarts: true })]]);
      roles.push(...(await startRoles([[KINDS[kind].producer, { url, libOptions: ctx.libOptions, dist: ctx.dist }]])));
      const [worker, producer] = roles;
      await client.query('CHECKPOINT');
      await resetStatements(client, ctx);
      const sent = await producer.request({ type: 'go', mode: 'latency', total, rate });
      await waitEmpty(url, table, 30_000);
      const statements = await topStatements(client, ctx);
      const report = await worker.request({ type: 'report' });
      // BENCH_TRACE_OUT: the whole trace and every job's times, for bench/latency-tail.mjs.
      if (process.env.BENCH_TRACE_OUT) {
        const file = `${process.env.BENCH_TRACE_OUT}.${kind}${ctx.dist ? '-base' : ''}.json`;
        writeFileSync(file, JSON.stringify({ trace: report.trace, starts: report.starts, commits: sent.commits }));
      }
      const started = new Map(report.starts);
      // From the commit's acknowledgement (what the target means), and from the call to add():
      // an upper bound, as the acknowledgement can reach a busy producer after the worker started.
      const lat = [];
      const fromSend = [];
      for (const [id, committedAt, sentAt] of sent.commits) {
        const s = started.get(id);
        if (s === undefined) continue;
        lat.push(s - committedAt);
        fromSend.push(s - sentAt);
      }
      const pct = percentiles(lat);
      const send = percentiles(fromSend);
      return {
        metrics: {
          p50: pct(50),
          p95: pct(95),
          p99: pct(99),
          max: pct(100),
          min: lat.length ? Math.min(...lat) : undefined,
          sendP50: send(50),
          sendP99: send(99),
          sendMax: send(100),
          producerMaxLagMs: sent.maxLagMs,
          statements,
        },
        check: check(
          lat.length === total && report.handled === total,
          `${lat.length} of ${total} jobs matched to a handler start (${report.handled} handler runs)`,
        ),
      };
    } finally {
      await Promise.all(roles.map((r) => r.stop(5000)));
    }
  });
}

/**
 * Workload 8: the first job from the worker process's start, as a user's worker process pays it
 * (node's start, loading the code, the Nest application's boot and its first claim included).
 * A backlog of `jobs` is preloaded; no gate: the clock starts when the worker process is forked
 * and stops at its first handler start (and, for the whole drain, when the table is empty).
 */
export function firstJob(ctx, { kind, jobs, nest = false }) {
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    const table = KINDS[kind].table;
    if (kind === 'lib') {
      await migrateLib(url, ctx);
      await client.query(LIB_PRELOAD, [jobs]);
      await client.query('VACUUM ANALYZE pgqueue.jobs');
    } else {
      await client.query(raw.schema);
      await client.query(raw.preload, [jobs]);
      await client.query(`VACUUM ANALYZE ${raw.TABLE}`);
    }
    await client.query('CHECKPOINT');
    let roles = [];
    try {
      const forkedAt = now();
      roles = await startRoles([[KINDS[kind].worker, workerArg(kind, url, ctx, nest ? { nest } : {})]]);
      const [worker] = roles;
      const startedAll = async () => (await worker.request({ type: 'progress' })).handled >= jobs;
      const done = await waitEmpty(url, table, Math.max(120_000, jobs * 2), { startedAll });
      const { starts: _s, trace, ...r } = await worker.request({ type: 'report' });
      await worker.stop();
      return {
        metrics: {
          firstJobMs: r.firstStart - forkedAt,
          bootMs: r.bootedAt - forkedAt,
          // From the process's own start (performance.timeOrigin) rather than the fork call.
          firstJobFromOriginMs: r.firstStart - r.processStart,
          drainFromForkMs: done.at - forkedAt,
          ...(trace?.length ? { trace: traceAround(trace, forkedAt, r.firstStart - forkedAt + 200) } : {}),
        },
        check: check(r.handled === jobs, `${r.handled} handler runs for ${jobs} jobs`),
      };
    } finally {
      await Promise.all(roles.map((r) => r.stop(2000)));
    }
  });
}
