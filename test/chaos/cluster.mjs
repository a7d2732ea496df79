// The chaos suite's moving parts: replica and producer processes, the database they share, the
// per-second sampler, and the final count of what was committed against what ran.

import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const here = path.dirname(fileURLToPath(import.meta.url));
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The tables the app and producer write: what was committed, and what ran (and how often). */
export const APP_SCHEMA = `
  CREATE TABLE chaos_enqueued (seq bigint PRIMARY KEY);
  CREATE TABLE chaos_done (
    seq        bigint PRIMARY KEY,
    runs       integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL,
    started_at timestamptz NOT NULL,
    done_at    timestamptz NOT NULL,
    pid        integer NOT NULL,
    -- The earliest claim of any run (job.startedAt: the claim's database time), runs that left no
    -- row included (recordRunStarts). With asyncCommit a crash may forget a claim of its last
    -- moments: that job runs again although its first recorded run ended after the crash (a
    -- replica held it, in a slot or prefetched, across the crash, or ran it and had its own
    -- insert cut by the crash).
    claimed_at timestamptz NOT NULL
  );`;

/**
 * A child process of test/chaos/. `exited` resolves with { code, signal, at } whenever it ends;
 * `unexpected` is set when it ended without the driver asking (a SIGTERM or SIGKILL it sent).
 */
export function spawnChild(script, arg, logFile) {
  const log = fs.openSync(logFile, 'a');
  const child = fork(path.join(here, script), [JSON.stringify(arg)], { stdio: ['ignore', log, log, 'ipc'] });
  fs.closeSync(log);
  child.on('error', () => undefined); // a send to a dead child: request() rejects instead
  const proc = {
    pid: child.pid,
    child,
    expectedExit: false,
    unexpected: null,
    exited: new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        if (!proc.expectedExit) proc.unexpected = { code, signal };
        resolve({ code, signal, at: Date.now() });
      }),
    ),
    ready: new Promise((resolve, reject) => {
      child.on('message', (m) => m.type === 'ready' && resolve());
      child.once('exit', (code, signal) =>
        reject(new Error(`${script} (pid ${child.pid}) exited before ready: ${code ?? signal}; see ${logFile}`)),
      );
    }),
    /** Sends `msg` and resolves with the first answer of the same type. */
    request(msg) {
      return new Promise((resolve, reject) => {
        if (!child.connected) return reject(new Error(`${script} (pid ${child.pid}) is gone; see ${logFile}`));
        const on = (m) => m.type === msg.type && (child.off('message', on), resolve(m));
        child.on('message', on);
        child.once('exit', (code, signal) =>
          reject(
            new Error(`${script} (pid ${child.pid}) exited (${code ?? signal}) before answering '${msg.type}'; see ${logFile}`),
          ),
        );
        child.send(msg, (err) => err && reject(err));
      });
    },
    kill() {
      proc.expectedExit = true;
      child.kill('SIGKILL');
      return proc.exited;
    },
    /** SIGSTOP / SIGCONT: freezes the process, so what the database says it holds stays put. */
    pause() {
      child.kill('SIGSTOP');
    },
    resume() {
      child.kill('SIGCONT');
    },
    /** SIGTERM; resolves with { code, signal, ms } (ms: until the process was gone). */
    async terminate() {
      proc.expectedExit = true;
      const t0 = Date.now();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const { code, signal, at } = await proc.exited;
      clearTimeout(timer);
      return { code, signal, ms: at - t0 };
    },
  };
  proc.ready.catch(() => undefined);
  return proc;
}

/** A fresh pg client, retrying while the server is restarting. */
export async function connect(url, applicationName, deadlineMs = 30_000) {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const c = new pg.Client({ connectionString: url, application_name: applicationName });
    c.on('error', () => undefined);
    try {
      await c.connect();
      return c;
    } catch (err) {
      if (Date.now() > until) throw err;
      await sleep(200);
    }
  }
}

/** Runs one query on a short-lived connection; null when the server does not answer. */
export async function tryQuery(url, sql, params) {
  let c;
  try {
    c = new pg.Client({ connectionString: url, application_name: 'chaos-driver', connectionTimeoutMillis: 2000 });
    c.on('error', () => undefined);
    await c.connect();
    return (await c.query(sql, params)).rows;
  } catch {
    return null;
  } finally {
    await c?.end().catch(() => undefined);
  }
}

/** Queue depth and dead tuples, once a second, into `samples` (null fields while the server is down). */
export function startSampler(url, samples) {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const t = Date.now();
      const rows = await tryQuery(
        url,
        `SELECT (SELECT count(*) FROM pgqueue.jobs WHERE state = 'waiting')::int AS waiting,
                (SELECT count(*) FROM pgqueue.jobs WHERE state = 'active')::int AS active,
                (SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'pgqueue' AND relname = 'jobs')::int AS dead_jobs,
                (SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'pgqueue' AND relname = 'job_history')::int AS dead_history`,
      );
      samples.push({ t, ...(rows?.[0] ?? { waiting: null, active: null, dead_jobs: null, dead_history: null }) });
      await sleep(Math.max(0, 1000 - (Date.now() - t)));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

/** Dead tuples of the queue's tables now, or null when the server does not answer. */
export async function deadTuples(url) {
  const rows = await tryQuery(
    url,
    `SELECT relname, n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE schemaname = 'pgqueue' AND relname IN ('jobs', 'job_history')`,
  );
  if (!rows) return null;
  const by = Object.fromEntries(rows.map((r) => [r.relname, r.dead]));
  return { jobs: by.jobs ?? 0, history: by.job_history ?? 0 };
}

/** Jobs a worker process holds a lease on (its `locked_by` carries its pid). */
export async function heldBy(url, pid) {
  const rows = await tryQuery(url, `SELECT count(*)::int AS n FROM pgqueue.jobs WHERE state = 'active' AND locked_by LIKE $1`, [
    `%:${pid}:%`,
  ]);
  return rows?.[0]?.n ?? 0;
}

/** Completions per second and enqueue-to-start latency per second, from `chaos_done`. */
export async function perSecond(url, fromMs, toMs) {
  const rows = await tryQuery(
    url,
    `SELECT floor((extract(epoch FROM done_at) * 1000 - $1) / 1000)::int AS s, count(*)::int AS n,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at) * 1000) AS p50,
            percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at) * 1000) AS p99
       FROM chaos_done WHERE done_at >= to_timestamp($1 / 1000.0) AND done_at < to_timestamp($2 / 1000.0)
      GROUP BY 1 ORDER BY 1`,
    [fromMs, toMs],
  );
  const seconds = Math.floor((toMs - fromMs) / 1000); // full seconds only: a partial last one would read as a dip
  const out = Array.from({ length: seconds }, () => ({ n: 0, p50: null, p99: null }));
  for (const r of rows ?? []) if (r.s >= 0 && r.s < seconds) out[r.s] = { n: r.n, p50: r.p50, p99: r.p99 };
  return out;
}

/** Committed jobs against completed ones, counted in the database. */
export async function tally(url) {
  const rows = await tryQuery(
    url,
    `SELECT (SELECT count(*) FROM chaos_enqueued)::int AS enqueued,
            (SELECT count(*) FROM chaos_done)::int AS completed,
            (SELECT count(*) FROM chaos_enqueued e WHERE NOT EXISTS (SELECT 1 FROM chaos_done d WHERE d.seq = e.seq))::int AS lost,
            (SELECT coalesce(sum(runs - 1), 0) FROM chaos_done)::int AS duplicates,
            (SELECT count(*) FROM pgqueue.job_history WHERE queue = 'chaos' AND state = 'failed')::int AS failed,
            (SELECT count(*) FROM pgqueue.jobs WHERE queue = 'chaos')::int AS live`,
  );
  if (!rows) throw new Error('the database did not answer the final count');
  return rows[0];
}

/**
 * Acknowledged commits (the producer's [first seq, count] batches) that the database does not
 * hold: a job whose COMMIT returned, lost afterwards (a server crash with a non-durable commit).
 */
export async function ackedMissing(url, acked) {
  const rows = await tryQuery(
    url,
    `SELECT count(*)::int AS n FROM unnest($1::bigint[], $2::int[]) AS b(first, n), generate_series(b.first, b.first + b.n - 1) AS s
      WHERE NOT EXISTS (SELECT 1 FROM chaos_enqueued e WHERE e.seq = s)`,
    [acked.map((b) => b[0]), acked.map((b) => b[1])],
  );
  if (!rows) throw new Error('the database did not answer the check of acknowledged commits');
  return rows[0].n;
}

/**
 * Jobs handed back by the rescuer after worker process `pid` died holding them: each one's
 * errors carry a LeaseExpiredError naming that worker (its id holds the pid).
 */
export async function rescuedFrom(url, pid) {
  const rows = await tryQuery(
    url,
    `SELECT count(*)::int AS n FROM (SELECT errors FROM pgqueue.jobs UNION ALL SELECT errors FROM pgqueue.job_history) j
      WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(j.errors) e WHERE e->>'name' = 'LeaseExpiredError' AND e->>'message' LIKE $1)`,
    [`%:${pid}:%`],
  );
  if (!rows) throw new Error('the database did not answer the count of rescued jobs');
  return rows[0].n;
}

/**
 * Every error recorded in the jobs' attempt histories (live and finished), grouped by name and
 * message with every word that holds a digit masked (lease times, worker ids, ports), with the
 * number of jobs and errors.
 */
export async function errorHistory(url) {
  const rows = await tryQuery(
    url,
    `SELECT e->>'name' AS name, regexp_replace(coalesce(e->>'message', ''), '[0-9a-f]*[0-9][0-9a-f]*', '#', 'g') AS message,
            count(DISTINCT j.id)::int AS jobs, count(*)::int AS n
       FROM (SELECT id, errors FROM pgqueue.jobs WHERE queue = 'chaos'
             UNION ALL SELECT id, errors FROM pgqueue.job_history WHERE queue = 'chaos') j,
            jsonb_array_elements(j.errors) e
      GROUP BY 1, 2 ORDER BY 4 DESC`,
  );
  if (!rows) throw new Error('the database did not answer the count of recorded errors');
  return rows;
}

/**
 * Folds the claim times the replicas appended as each run started (replica.cjs) into
 * chaos_done.claimed_at, so it is each job's earliest claim over every run, including a run the
 * crash cut before its own insert (that run left no row, and its claim may be the forgotten one).
 * A line of a job with no row (it never completed a run) changes nothing here: the tally counts
 * such a job as lost.
 */
export async function recordRunStarts(url, files) {
  const earliest = new Map();
  for (const f of files) {
    if (!fs.existsSync(f)) continue;
    const lines = fs.readFileSync(f, 'utf8').split('\n');
    lines.pop(); // after the last newline: empty, or a line a SIGKILL cut short
    for (const line of lines) {
      const [seq, ms] = line.split(' ');
      const t = Number(ms);
      if (!(earliest.get(seq) <= t)) earliest.set(seq, t);
    }
  }
  const rows = await tryQuery(
    url,
    `UPDATE chaos_done d SET claimed_at = to_timestamp(s.ms / 1000.0)
       FROM unnest($1::bigint[], $2::float8[]) AS s(seq, ms)
      WHERE d.seq = s.seq AND to_timestamp(s.ms / 1000.0) < d.claimed_at
     RETURNING d.seq`,
    [[...earliest.keys()], [...earliest.values()]],
  );
  if (!rows) throw new Error("the database did not take the runs' claim times");
  return rows.length;
}

/**
 * Duplicate runs by when the job's first run ended (chaos_done keeps the first run's times;
 * `runs` counts the others): more than `windowMs` before `atMs`, within that window, or after
 * `atMs`; and how many jobs first ended within the window.
 */
export async function duplicatesAround(url, atMs, windowMs) {
  const rows = await tryQuery(
    url,
    `WITH w AS (SELECT to_timestamp(($1::float8 - $2::float8) / 1000.0) AS lo, to_timestamp($1 / 1000.0) AS crash)
     SELECT coalesce(sum(runs - 1) FILTER (WHERE done_at < lo), 0)::int AS before,
            coalesce(sum(runs - 1) FILTER (WHERE done_at >= lo AND done_at < crash), 0)::int AS within,
            coalesce(sum(runs - 1) FILTER (WHERE done_at >= crash AND NOT (claimed_at >= lo AND claimed_at < crash)), 0)::int AS after,
            coalesce(sum(runs - 1) FILTER (WHERE done_at >= crash AND claimed_at >= lo AND claimed_at < crash), 0)::int AS claimed_within,
            count(*) FILTER (WHERE done_at >= lo AND done_at < crash)::int AS completed_within,
            count(*) FILTER (WHERE claimed_at >= lo AND claimed_at < crash)::int AS claims_within
       FROM chaos_done, w`,
    [atMs, windowMs],
  );
  if (!rows) throw new Error('the database did not answer the count of duplicates around the crash');
  return rows[0];
}

/**
 * Duplicate runs that no recorded error accounts for. A job runs again only after an attempt
 * that the database saw end badly (a LeaseExpiredError after its worker died, or the handler's
 * own write failing on a lost connection, possibly after it committed), so each extra run needs
 * an error in the job's history, except after a server crash with asyncCommit (a forgotten claim
 * or completion). Counted per job: extra runs beyond its recorded errors.
 */
export async function unexplainedDuplicates(url) {
  const rows = await tryQuery(
    url,
    `SELECT coalesce(sum(greatest(0, d.runs - 1 - e.n)), 0)::int AS n
       FROM chaos_done d,
            LATERAL (SELECT count(x) AS n
                       FROM (SELECT payload, errors FROM pgqueue.jobs WHERE queue = 'chaos'
                             UNION ALL SELECT payload, errors FROM pgqueue.job_history WHERE queue = 'chaos') j
                       LEFT JOIN LATERAL jsonb_array_elements(j.errors) x ON true
                      WHERE j.payload->>'seq' = d.seq::text) e
      WHERE d.runs > 1`,
  );
  if (!rows) throw new Error('the database did not answer the count of unexplained duplicates');
  return rows[0].n;
}
