// Process and database plumbing for bench/run.mjs: role processes, fresh databases, the start
// gate, the drain poll, and CPU / WAL / transaction counters read around a timed phase.

import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDatabase, dropDatabase } from '../scripts/pg-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const now = () => performance.timeOrigin + performance.now();
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Nearest-rank percentiles of `values`: returns p => value (p = 100 is the maximum). */
export function percentiles(values) {
  const v = [...values].sort((x, y) => x - y);
  return (p) => v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))];
}

/**
 * A role process (bench/<script>) talking IPC. `request(msg)` sends a command and resolves with
 * the answer of the same type; an 'error' message or an early exit rejects every waiter.
 */
export async function startRole(script, arg, { readyTimeoutMs = 60_000 } = {}) {
  // BENCH_CPU_PROF=dir: every role process writes a V8 CPU profile there when it exits
  // (node --cpu-prof; open it in Chrome DevTools or summarise it with bench/profile-top.mjs).
  // BENCH_NODE_ARGS: more node and V8 flags for every role (diagnostics: '--trace-deopt').
  const execArgv = [
    ...(process.env.BENCH_CPU_PROF
      ? [
          '--cpu-prof',
          `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`,
          `--cpu-prof-interval=${process.env.BENCH_CPU_PROF_US ?? 1000}`,
        ]
      : []),
    ...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(/\s+/).filter(Boolean) : []),
  ];
  const child = fork(path.join(here, script), [JSON.stringify(arg)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv,
  });
  const waiters = new Map();
  let dead = null;
  const rejectAll = (err) => {
    dead = err;
    for (const w of waiters.values()) w.reject(err);
    waiters.clear();
  };
  child.on('message', (m) => {
    if (m.type === 'error') return rejectAll(new Error(`${script} (pid ${child.pid}) failed:\n${m.message}`));
    const w = waiters.get(m.type);
    if (w) {
      waiters.delete(m.type);
      w.resolve(m);
    }
  });
  child.on('exit', (code, signal) => {
    if (!role.stopping || code !== 0)
      rejectAll(dead ?? new Error(`${script} (pid ${child.pid}) exited early: code ${code}, signal ${signal}`));
  });
  const wait = (type, timeoutMs) =>
    new Promise((resolve, reject) => {
      if (dead) return reject(dead);
      const timer = setTimeout(() => {
        waiters.delete(type);
        reject(new Error(`${script} (pid ${child.pid}): no '${type}' within ${timeoutMs} ms`));
      }, timeoutMs);
      waiters.set(type, {
        resolve: (m) => (clearTimeout(timer), resolve(m)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
    });
  const role = {
    pid: child.pid,
    stopping: false,
    ready: wait('ready', readyTimeoutMs),
    request(msg, timeoutMs = 600_000) {
      const answer = wait(msg.type, timeoutMs);
      child.send(msg);
      return answer;
    },
    /** Asks the role to close gracefully; kills it if it has not exited after `graceMs`. */
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      role.stopping = true;
      const exited = new Promise((r) => child.once('exit', r));
      if (child.connected) child.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  role.ready.catch(() => undefined);
  return role;
}

/** Starts every role, then waits until all are ready (stopping them all if one fails). */
export async function startRoles(specs) {
  const roles = await Promise.all(specs.map(([script, arg]) => startRole(script, arg)));
  try {
    await Promise.all(roles.map((r) => r.ready));
  } catch (err) {
    await Promise.all(roles.map((r) => r.stop(2000)));
    throw err;
  }
  return roles;
}

/** A fresh database for one run; `use(client, url)` gets an open client on it. Dropped afterwards. */
export async function withDatabase(adminUrl, name, use) {
  await dropDatabase(adminUrl, name);
  const url = await createDatabase(adminUrl, name);
  const client = new pg.Client({ connectionString: url, application_name: 'bench-run' });
  await client.connect();
  try {
    return await use(client, url);
  } finally {
    await client.end().catch(() => undefined);
    await dropDatabase(adminUrl, name);
  }
}

/**
 * The start gate of the drains: the backlog's table is locked (SHARE: reads go on, claims wait)
 * while the workers boot, so every worker process starts on the same instant, when `open()`
 * commits. Returns { open(), waiters() }.
 */
export async function lockTable(url, table) {
  const c = new pg.Client({ connectionString: url, application_name: 'bench-gate' });
  await c.connect();
  await c.query('BEGIN');
  await c.query(`LOCK TABLE ${table} IN SHARE MODE`);
  return {
    /** How many sessions wait on a lock (the workers' first claims). */
    async waiters() {
      const { rows } = await c.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
      );
      return rows[0].n;
    },
    async open() {
      await c.query('COMMIT');
      await c.end();
    },
  };
}

/**
 * Polls, on its own connection, until `table` has no row (one primary-key probe each time);
 * returns the instant it saw that and how many polls it took. With `startedAll`, the database is
 * only polled once that returns true (the workers say every job has started): a probe walks the
 * dead index entries at the head of a draining table and costs milliseconds, so probing all along
 * would take CPU from the run it measures.
 */
export async function waitEmpty(url, table, deadlineMs, { everyMs = 10, startedAll } = {}) {
  const c = new pg.Client({ connectionString: url, application_name: 'bench-poll' });
  await c.connect();
  try {
    const deadline = now() + deadlineMs;
    let polls = 0;
    for (;;) {
      if (!startedAll || (await startedAll())) {
        polls++;
        const { rows } = await c.query(`SELECT id FROM ${table} ORDER BY id LIMIT 1`);
        if (rows.length === 0) return { at: now(), polls };
      }
      if (now() > deadline) throw new Error(`${table} still not empty after ${deadlineMs} ms`);
      await sleep(everyMs);
    }
  } finally {
    await c.end();
  }
}

const CLK_TCK = 100; // Linux USER_HZ; /proc/<pid>/stat counts CPU time in these ticks

/** CPU seconds (user + system) of a process, or null where /proc is not readable. */
export function cpuSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return null;
  }
}

/** Busy and total CPU seconds of the whole machine (all cores), from /proc/stat. */
function machineCpu() {
  try {
    const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = cpu.reduce((a, b) => a + b, 0) / CLK_TCK;
    const idle = (cpu[3] + (cpu[4] ?? 0)) / CLK_TCK;
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/**
 * Counters read before and after a timed phase: CPU of the given role processes, of the server's
 * processes (when local: every pid pg_stat_activity lists, background processes included), of
 * the whole machine; WAL position.
 */
export async function counters(client, rolePids) {
  const { rows: procs } = await client.query('SELECT pid, datname FROM pg_stat_activity');
  const {
    rows: [w],
  } = await client.query('SELECT pg_current_wal_insert_lsn()::text AS lsn');
  const pgCpu = new Map(procs.map((p) => [p.pid, cpuSeconds(p.pid)]).filter(([, s]) => s !== null));
  // The backends on this run's own database: on a shared server, the others' are not ours.
  const ours = new Set(procs.filter((p) => p.datname === client.database).map((p) => p.pid));
  const dbCpu = new Map([...pgCpu].filter(([pid]) => ours.has(pid)));
  return { t: now(), roles: rolePids.map(cpuSeconds), pgCpu, dbCpu, machine: machineCpu(), lsn: w.lsn };
}

/** What happened between two `counters` readings: CPU as % of one core, WAL bytes per job. */
export async function usage(client, a, b, jobs) {
  const wallS = (b.t - a.t) / 1000;
  const {
    rows: [w],
  } = await client.query('SELECT pg_wal_lsn_diff($1, $2)::bigint AS bytes', [b.lsn, a.lsn]);
  let pgS = 0;
  for (const [pid, s] of b.pgCpu) pgS += s - (a.pgCpu.get(pid) ?? 0); // a process born meanwhile counts whole
  let dbS = 0;
  for (const [pid, s] of b.dbCpu) dbS += s - (a.dbCpu.get(pid) ?? 0);
  const pct = (s) => Math.round((100 * s) / wallS);
  const roleList = a.roles.map((s, i) => (s === null || b.roles[i] === null ? null : b.roles[i] - s));
  const roleS = roleList.includes(null) ? null : roleList.reduce((x, y) => x + y, 0);
  return {
    // CPU per job of the worker processes and of this database's backends: the work a run cost,
    // whatever else the machine was doing (wall time and rates are not).
    cpuMsPerJob: roleS === null || !a.dbCpu.size ? null : ((roleS + dbS) * 1000) / jobs,
    workerCpuPct: roleList.map((s) => (s === null ? null : pct(s))),
    // CPU (user + system) of the role processes per 1,000 jobs, in ms: a measure of the client's
    // own cost per job that does not depend on how busy the machine was (10 ms ticks from /proc).
    workerCpuMsPer1000: roleS === null ? null : (1e6 * roleS) / jobs,
    postgresCpuPct: a.pgCpu.size ? pct(pgS) : null,
    // The same for every server process (backends and background workers): the server's cost per job.
    postgresCpuMsPer1000: a.pgCpu.size ? (1e6 * pgS) / jobs : null,
    machineBusyPct:
      a.machine && b.machine ? Math.round((100 * (b.machine.busy - a.machine.busy)) / (b.machine.total - a.machine.total)) : null,
    walBytesPerJob: Math.round(Number(w.bytes) / jobs),
  };
}

/**
 * Transactions committed in the current database so far, read on a fresh connection once the
 * sessions that ran them have closed (a backend flushes its counters when it exits).
 */
export async function committedXacts(url) {
  // Counters are approximate (a few transactions either way): give exiting backends a moment.
  await sleep(300);
  const c = new pg.Client({ connectionString: url, application_name: 'bench-stats' });
  await c.connect();
  try {
    const { rows } = await c.query('SELECT xact_commit::bigint AS x FROM pg_stat_database WHERE datname = current_database()');
    return Number(rows[0].x);
  } finally {
    await c.end();
  }
}
