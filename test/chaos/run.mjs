// The chaos suite: `npm run test:chaos` (full) or `npm run test:chaos -- --short` (CI).
//
// For each scenario: a fresh database on an embedded PostgreSQL this script owns (it must be able
// to restart it), a producer at a steady rate, two replicas of a small app (test/chaos/replica.cjs),
// then baseline, fault and recovery phases. Afterwards both replicas get
// SIGTERM while the producer still runs (shutdown under pressure), a fresh replica drains the
// rest, and the database says how many committed jobs never ran and how many ran twice.
//
// Flags: --short (CI durations; only correctness targets fail the run: loss, duplicates beyond
// the jobs a killed replica held, a replica that exits on its own or unclean shutdown; the rate
// targets are reported), --only=restart,crash (scenario keys), --keep (leave databases and logs).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDatabase, dropDatabase, startPostgres } from '../../scripts/pg-server.mjs';
import { APP_SCHEMA, connect, deadTuples, heldBy, perSecond, sleep, spawnChild, startSampler, tally, tryQuery } from './cluster.mjs';
import { evaluate, printReport } from './report.mjs';
import { SCENARIOS } from './scenarios.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const short = args.includes('--short');
const keep = args.includes('--keep');
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',');

const CONFIG = short
  ? { warmupMs: 2000, baselineMs: 5000, faultMs: 5000, recoveryMs: 12_000, downMs: 3000, kills: 3, killEveryMs: 2000, rate: 300, highRate: 5000, burst: 20_000 }
  : { warmupMs: 3000, baselineMs: 10_000, faultMs: 10_000, recoveryMs: 20_000, downMs: 5000, kills: 5, killEveryMs: 3000, rate: 300, highRate: 10_000, burst: 30_000 };
/** The replicas' lease and shutdown grace: the drain waits out one lease; SIGTERM must finish within the grace. */
const SHUTDOWN_TIMEOUT_MS = 5000;
const LEASE_MS = 10_000;
const REPLICA_OPTIONS = { leaseMs: LEASE_MS, shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS };

const scenarios = only ? SCENARIOS.filter((s) => only.includes(s.key)) : SCENARIOS;
if (only && scenarios.length !== only.length) {
  console.error(`Unknown scenario in --only; the keys are: ${SCENARIOS.map((s) => s.key).join(', ')}`);
  process.exit(2);
}

async function runScenario(sc, server, logDir) {
  const db = `chaos_${sc.key.replace(/-/g, '_')}`;
  await dropDatabase(server.url, db);
  const url = await createDatabase(server.url, db);
  const setup = await connect(url, 'chaos-driver');
  await setup.query(APP_SCHEMA);
  await setup.end();

  const log = (name) => path.join(logDir, `${sc.key}-${name}.log`);
  const notes = [];
  const replicas = [];
  const everyReplica = [];
  let dupBound = 0;
  const startReplica = async (i) => {
    const r = spawnChild('replica.cjs', { url, options: REPLICA_OPTIONS }, log(`replica-${i}`));
    replicas[i] = r;
    everyReplica.push(r);
    await r.ready;
  };
  const ctx = {
    url,
    cfg: CONFIG,
    note: (s) => notes.push(s),
    startReplica,
    /**
     * SIGKILLs replica i, at a moment it holds jobs when one comes within 3 s (at 300 jobs/s of
     * 1 ms jobs a replica is idle most of the time, and killing an idle one proves little);
     * returns (and adds to the duplicate bound) the jobs it held.
     */
    async killReplica(i) {
      const watcher = await connect(url, 'chaos-driver');
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        const { rows } = await watcher.query(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE state = 'active' AND locked_by LIKE $1`, [`%:${replicas[i].pid}:%`]);
        if (rows[0].n > 0) break;
      }
      await watcher.end();
      await replicas[i].kill();
      const held = await heldBy(url, replicas[i].pid);
      dupBound += held;
      return held;
    },
    restartServer: (downMs) => server.restart({ downMs }),
    producer: null,
  };

  const producer = spawnChild('producer.cjs', { url }, log('producer'));
  ctx.producer = producer;
  await producer.ready;
  // The first replica migrates the schema; the second boots on it.
  await startReplica(0);
  await startReplica(1);
  const samples = [];
  const stopSampler = startSampler(url, samples);

  await producer.request({ type: 'rate', perSec: CONFIG.rate });
  await sleep(CONFIG.warmupMs);
  const t0 = Date.now();
  await sleep(CONFIG.baselineMs);
  const t1 = Date.now();
  const deadBaseline = await deadTuples(url);
  await sc.fault(ctx);
  const t2 = Date.now();
  const deadFault = await deadTuples(url);
  await sleep(CONFIG.recoveryMs);
  const t3 = Date.now();
  const deadRecovery = await deadTuples(url);

  // Shutdown under pressure: SIGTERM while the producer still enqueues and the replicas hold jobs.
  const backlogAtStop = (await tryQuery(url, `SELECT count(*)::int AS n FROM pgqueue.jobs`))?.[0]?.n ?? null;
  const unexpected = everyReplica.filter((r) => r.unexpected).map((r) => ({ pid: r.pid, ...r.unexpected }));
  const shutdowns = await Promise.all(replicas.map((r) => r.terminate()));
  const produced = await producer.request({ type: 'stop' });
  await producer.exited;
  notes.push(`the producer committed ${produced.committed} jobs; ${produced.failedBatches} transaction(s) failed and were not retried`);

  // A fresh replica finishes the rest; jobs a killed replica held come back after their lease.
  const drainer = spawnChild('replica.cjs', { url, options: REPLICA_OPTIONS }, log('drainer'));
  await drainer.ready;
  const drainUntil = Date.now() + LEASE_MS + 20_000;
  let counts = await tally(url);
  while ((counts.live > 0 || counts.lost > 0) && Date.now() < drainUntil) {
    await sleep(250);
    counts = await tally(url);
  }
  const drainerExit = await drainer.terminate();
  if (drainer.unexpected) unexpected.push({ pid: drainer.pid, ...drainer.unexpected });
  await stopSampler();

  const series = await perSecond(url, t0, t3);
  // Whole seconds from t0; a phase starts at the first second that lies wholly inside it.
  const sec = (t) => Math.ceil((t - t0) / 1000);
  const phases = {
    baseline: series.slice(0, Math.floor((t1 - t0) / 1000)),
    fault: series.slice(sec(t1), Math.floor((t2 - t0) / 1000)),
    recovery: series.slice(sec(t2)),
  };
  const latency = await tryQuery(
    url,
    `SELECT CASE WHEN started_at < to_timestamp($2 / 1000.0) THEN 'baseline' WHEN started_at < to_timestamp($3 / 1000.0) THEN 'fault' ELSE 'recovery' END AS phase,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at) * 1000) AS p50,
            percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at) * 1000) AS p99
       FROM chaos_done WHERE started_at >= to_timestamp($1 / 1000.0) AND started_at < to_timestamp($4 / 1000.0) GROUP BY 1`,
    [t0, t1, t2, t3],
  );
  if (!keep) await dropDatabase(server.url, db);
  return {
    key: sc.key,
    title: sc.title,
    recoverWithinMs: sc.recoverWithinMs ?? null,
    notes,
    phases,
    latency: Object.fromEntries((latency ?? []).map((r) => [r.phase, { p50: r.p50, p99: r.p99 }])),
    dead: { baseline: deadBaseline, fault: deadFault, recovery: deadRecovery },
    samples: samples.map((s) => ({ ...s, t: s.t - t0 })),
    produced,
    backlogAtStop,
    counts,
    dupBound,
    unexpected,
    shutdowns,
    drainerExit,
    shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
    vacuumAtDeadTuples: 10_000, // the library's default; replica.cjs does not change it
  };
}

async function main() {
  if (process.env.DATABASE_URL) {
    console.log('test:chaos ignores DATABASE_URL: scenario 1 restarts the server, so the suite runs its own embedded PostgreSQL.');
    delete process.env.DATABASE_URL;
  }
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-chaos-'));
  // Durable (fsync on, synchronous_commit on) and the default max_connections: a production-like server.
  const server = await startPostgres({ durable: true, settings: { max_connections: 100 } });
  console.log(`chaos: ${short ? 'short' : 'full'} run of ${scenarios.length} scenario(s); ${CONFIG.rate} jobs/s offered; logs in ${logDir}`);
  const results = [];
  try {
    for (const sc of scenarios) {
      const t = Date.now();
      process.stdout.write(`  ${sc.title} ... `);
      const r = await runScenario(sc, server, logDir);
      r.verdict = evaluate(r, { short });
      results.push(r);
      console.log(`${r.verdict.failures.length ? 'FAILED' : 'ok'} (${Math.round((Date.now() - t) / 1000)} s)`);
    }
  } finally {
    await server.stop();
  }
  const failed = printReport(results, { short, config: CONFIG, outDir: path.join(here, 'results') });
  if (failed && !keep) console.log(`Logs kept in ${logDir}`);
  else if (!keep) fs.rmSync(logDir, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
