// The BullMQ peers' runs (bullmq-*.cjs): BullMQ 6.7 on PostgreSQL ('bqpg', createPostgresBackend,
// the run's fresh database) and on Redis ('bqredis', 127.0.0.1:6379, a key prefix per run). Their
// package lives in bench/peers and is installed on demand (`peerStatus`); a peer that cannot be
// loaded or reached is skipped with its reason, never given a figure.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { counters, now, percentiles, sleep, startRoles, usage, withDatabase } from './harness.mjs';
import { rampFigures } from './workloads.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const peersDir = path.join(here, 'peers');

export const PEERS = {
  bqpg: { label: 'BullMQ on PostgreSQL', backend: 'pg' },
  bqredis: { label: 'BullMQ on Redis', backend: 'redis' },
};

function redisReachable(url) {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port || 6379) });
    const done = (why) => (s.destroy(), resolve(why));
    s.setTimeout(1000, () => done('no answer within 1 s'));
    s.on('error', (e) => done(e.message));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => done(String(d).startsWith('+PONG') ? null : `answered ${JSON.stringify(String(d).trim())}`));
  });
}

/**
 * Whether each peer can run: { bqpg: { ok, why, version }, bqredis: ... }. Installs bench/peers
 * (npm install, its own package.json) when its node_modules is missing, unless `install` is false.
 */
export async function peerStatus({ install = true } = {}) {
  const have = () => fs.existsSync(path.join(peersDir, 'node_modules', 'bullmq', 'package.json'));
  let why = null;
  if (!have() && install) {
    try {
      process.stderr.write('[bench] installing the BullMQ peers into bench/peers (npm install) ...\n');
      execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: peersDir, stdio: 'inherit' });
    } catch (err) {
      why = `npm install in bench/peers failed (${err.message.split('\n')[0]})`;
    }
  }
  if (!have())
    why ??= `bench/peers is not installed (${install ? '' : 'the smoke run installs nothing; '}npm --prefix bench/peers install)`;
  const version = why ? null : JSON.parse(fs.readFileSync(path.join(peersDir, 'node_modules', 'bullmq', 'package.json'))).version;
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redisWhy = why ?? (await redisReachable(redisUrl).then((w) => (w ? `Redis at ${redisUrl}: ${w}` : null)));
  return {
    bqpg: { ok: !why, why, version },
    bqredis: { ok: !redisWhy, why: redisWhy, version },
  };
}

function roleArg(kind, url, ctx, extra = {}) {
  return { backend: PEERS[kind].backend, url, prefix: `bench_${ctx.dbName}`, ...extra };
}

/** Boots a producer of `kind` (migrating the run's database for BullMQ on PostgreSQL). */
async function producerOf(kind, url, ctx) {
  const [p] = await startRoles([['bullmq-producer.cjs', roleArg(kind, url, ctx, { migrate: true })]]);
  return p;
}

/** Workloads 1-2 for a peer: as enqueue() in workloads.mjs. */
export function enqueuePeer(ctx, { kind, mode, total, callers = 10, batch = 1000 }) {
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    const producer = await producerOf(kind, url, ctx);
    try {
      const a = await counters(client, [producer.pid]);
      const r = await producer.request({ type: 'go', mode, total, callers, batch });
      const b = await counters(client, [producer.pid]);
      const use = await usage(client, a, b, total);
      const { n } = await producer.request({ type: 'count' });
      return {
        metrics: { rate: (total * 1000) / r.elapsedMs, ...use },
        check: { ok: n === total, detail: `${n} of ${total} jobs stored` },
      };
    } finally {
      await producer.request({ type: 'clean' }).catch(() => undefined);
      await producer.stop(5000);
    }
  });
}

/**
 * Workload 3 for a peer: a backlog of `jobs` added through addBulk (not timed), then one worker
 * process started (`run`); the clock runs until it has seen every job's 'completed' event.
 */
export function drainPeer(ctx, { kind, jobs }) {
  return withDatabase(ctx.adminUrl, ctx.dbName, async (client, url) => {
    const producer = await producerOf(kind, url, ctx);
    let roles = [];
    try {
      await producer.request({ type: 'go', mode: 'preload', total: jobs, batch: 1000 });
      await client.query('CHECKPOINT');
      roles = await startRoles([['bullmq-worker.cjs', roleArg(kind, url, ctx)]]);
      const [worker] = roles;
      const a = await counters(client, [worker.pid]);
      const t0 = now();
      await worker.request({ type: 'run' });
      const deadline = t0 + Math.max(300_000, jobs * 5);
      let done = 0;
      for (;;) {
        const p = await worker.request({ type: 'progress' });
        if (p.completed >= jobs) break;
        if (now() > deadline) throw new Error(`${PEERS[kind].label}: ${p.completed} of ${jobs} completed by the deadline`);
        await sleep(10);
      }
      done = now();
      const b = await counters(client, [worker.pid]);
      const { starts: _s, ...r } = await worker.request({ type: 'report' });
      await worker.stop();
      const use = await usage(client, a, b, jobs);
      const wallMs = done - t0;
      return {
        metrics: {
          rate: (jobs * 1000) / wallMs,
          wallMs,
          firstStartMs: r.firstStart - t0,
          ...rampFigures([r], t0, done, jobs),
          ...use,
          perProcess: [r.handled],
        },
        check: {
          ok: r.handled === jobs && r.completed === jobs,
          detail: `${r.handled} handler runs and ${r.completed} completions for ${jobs} jobs`,
        },
      };
    } finally {
      await Promise.all(roles.map((r) => r.stop(2000)));
      await producer.request({ type: 'clean' }).catch(() => undefined);
      await producer.stop(5000);
    }
  });
}

/** Workload 4 for a peer: an idle, running worker; `rate` add() calls per second for `seconds`. */
export function latencyPeer(ctx, { kind, rate, seconds }) {
  const total = Math.round(rate * seconds);
  return withDatabase(ctx.adminUrl, ctx.dbName, async (_client, url) => {
    const producer = await producerOf(kind, url, ctx);
    let roles = [];
    try {
      roles = await startRoles([['bullmq-worker.cjs', roleArg(kind, url, ctx, { recordStarts: true, autorun: true })]]);
      const [worker] = roles;
      const sent = await producer.request({ type: 'go', mode: 'latency', total, rate });
      const deadline = now() + 30_000;
      while ((await worker.request({ type: 'progress' })).handled < total && now() < deadline) await sleep(20);
      const report = await worker.request({ type: 'report' });
      const started = new Map(report.starts);
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
          sendP50: send(50),
          sendP99: send(99),
          sendMax: send(100),
          producerMaxLagMs: sent.maxLagMs,
        },
        check: {
          ok: lat.length === total,
          detail: `${lat.length} of ${total} jobs matched to a handler start (${report.handled} handler runs)`,
        },
      };
    } finally {
      await Promise.all(roles.map((r) => r.stop(5000)));
      await producer.request({ type: 'clean' }).catch(() => undefined);
      await producer.stop(5000);
    }
  });
}
