'use strict';
// What every role process of the benchmark shares: the clock, the IPC protocol with run.mjs,
// RSS sampling, and the two ways of producing (closed-loop callers, open-loop schedule).
//
// Protocol (process.send / 'message'): the role sends { type: 'ready' } once it can work; the
// parent then sends commands ({ type: 'go' | 'report' | 'stop', ... }); each command's handler
// answers with { type: <same>, ...result }. A failure is sent as { type: 'error', message } and
// ends the process with code 1. A role never outlives its parent.

const { setTimeout: sleep } = require('node:timers/promises');

/** Milliseconds since the epoch, sub-millisecond, comparable between processes of one machine. */
function now() {
  return performance.timeOrigin + performance.now();
}

function fail(err) {
  const message = err && err.stack ? err.stack : String(err);
  if (process.connected) process.send({ type: 'error', message }, () => process.exit(1));
  else {
    process.stderr.write(`bench role ${process.pid}: ${message}\n`);
    process.exit(1);
  }
}

/**
 * Answers the parent's commands with `handlers[type](message)`. A handler's return value
 * (an object) is sent back with the same type; `stop` should end the process itself.
 */
function serve(handlers) {
  if (!process.send) {
    process.stderr.write('bench role: start me with child_process.fork from bench/run.mjs\n');
    process.exit(2);
  }
  process.on('disconnect', () => process.exit(4));
  process.on('unhandledRejection', fail);
  process.on('message', (m) => {
    const handler = handlers[m.type];
    if (!handler) return fail(new Error(`unknown command ${JSON.stringify(m.type)}`));
    Promise.resolve()
      .then(() => handler(m))
      .then((result) => {
        if (result !== undefined) process.send({ type: m.type, ...result });
      }, fail);
  });
}

/** The role's options, passed by the parent as one JSON argument. */
function roleArgs() {
  try {
    return JSON.parse(process.argv[2] ?? '{}');
  } catch (err) {
    process.stderr.write(`bench role: bad argument ${process.argv[2]}: ${err.message}\n`);
    process.exit(2);
  }
}

/** Samples this process's memory every `everyMs`: [epoch ms, RSS bytes, V8 heap used bytes]. */
function sampleRss(everyMs = 500) {
  const samples = [];
  const take = () => {
    const m = process.memoryUsage();
    samples.push([now(), m.rss, m.heapUsed]);
  };
  take();
  setInterval(take, everyMs).unref();
  return samples;
}

/**
 * Closed loop: `callers` concurrent callers each await `send(i)` before sending the next,
 * until `total` calls were made. Returns the elapsed milliseconds.
 */
async function closedLoop(total, callers, send) {
  let next = 0;
  const t0 = now();
  const caller = async () => {
    for (let i = next++; i < total; i = next++) await send(i);
  };
  await Promise.all(Array.from({ length: Math.min(callers, total) }, caller));
  return now() - t0;
}

/**
 * Open loop: call `send(i)` at `ratePerSec`, on schedule whatever the earlier calls are doing,
 * `total` times; resolves when every call has settled. Returns how far behind schedule the
 * worst send went out (ms), so a producer that could not keep up is visible.
 */
async function openLoop(total, ratePerSec, send) {
  const interval = 1000 / ratePerSec;
  const t0 = now() + 20;
  const pending = [];
  let maxLagMs = 0;
  for (let i = 0; i < total; i++) {
    const due = t0 + i * interval;
    const wait = due - now();
    if (wait > 0.5) await sleep(wait);
    maxLagMs = Math.max(maxLagMs, now() - due);
    pending.push(send(i));
  }
  await Promise.all(pending);
  return maxLagMs;
}

/**
 * Handler starts per 10 ms bucket of the epoch clock ({ [bucket]: count }): enough to tell the
 * first second of a drain apart (jobs in it, time to full speed) at one increment per job.
 */
function startBuckets() {
  const buckets = new Map();
  return {
    hit(t) {
      const b = Math.floor(t / 10);
      buckets.set(b, (buckets.get(b) ?? 0) + 1);
    },
    toJSON() {
      return [...buckets];
    },
  };
}

/**
 * BENCH_TRACE=1: every statement this process sends through `pg` is recorded as [sent at (epoch
 * ms), answered after (ms), rows, the statement's first 60 characters or its prepared name], and
 * every connection opened as ['connect', at, ms]: the round trips of the first second, told apart
 * from what the CPU does. Diagnostics only; off, nothing is wrapped.
 */
function traceQueries(pg) {
  const log = [];
  if (!process.env.BENCH_TRACE) return log;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function traced(config, values, cb) {
    const t = now();
    const text = typeof config === 'string' ? config : (config?.name ?? config?.text ?? '');
    const label = String(text).replace(/\s+/g, ' ').trim().slice(0, 60);
    const done = (err, res) => log.push([t, now() - t, err ? 'error' : (res?.rowCount ?? res?.rows?.length ?? null), label]);
    const wrap = (f) =>
      function (err, res) {
        done(err, res);
        return f.apply(this, arguments);
      };
    // pg-pool passes a callback (as `values` or after it); a direct client.query returns a promise.
    if (typeof values === 'function') return query.call(this, config, wrap(values));
    if (typeof cb === 'function') return query.call(this, config, values, wrap(cb));
    const r = query.call(this, config, values);
    if (r && typeof r.then === 'function')
      r.then(
        (res) => done(null, res),
        (err) => done(err),
      );
    return r;
  };
  // Notifications too: when each reached the process (the pick-up path's first step).
  const emit = pg.Client.prototype.emit;
  pg.Client.prototype.emit = function tracedEmit(event, msg) {
    if (event === 'notification') log.push([now(), 0, 'notification', String(msg?.payload ?? '').slice(0, 60)]);
    return emit.apply(this, arguments);
  };
  const connect = pg.Client.prototype.connect;
  pg.Client.prototype.connect = function tracedConnect(cb) {
    const t = now();
    // pg-pool connects with a callback, a direct client without one (a promise).
    const r = connect.call(
      this,
      typeof cb === 'function'
        ? function (err) {
            log.push([t, now() - t, err ? 'error' : 'connect', '']);
            return cb.apply(this, arguments);
          }
        : cb,
    );
    if (r && typeof r.then === 'function') r.then(() => log.push([t, now() - t, 'connect', '']));
    return r;
  };
  return log;
}

module.exports = { now, serve, roleArgs, sampleRss, closedLoop, openLoop, fail, startBuckets, traceQueries };
