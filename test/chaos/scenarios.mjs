// The faults. Each `fault(ctx)` starts at the end of the baseline phase and returns when the
// fault is over; the recovery phase is measured from then. `recoverWithinMs` is the issue's
// target for the time from the fault's end until the completion rate is back above 90 % of
// baseline (scenarios 1 to 5, 10 and 11); the others report that time without a target.
// `cutsConnections`: the fault cuts or refuses connections, so a handler's own insert may fail
// its attempt (an error the report allows); `replicaOptions` go to every replica of the scenario.
// A fault that did not take place (no backend killed, no connection held, no extra load offered)
// calls `ctx.inconclusive(why)`, which fails the scenario: a fault turned no-op must not pass.

import pg from 'pg';
import { connect, sleep, tryQuery } from './cluster.mjs';

/** Terminates every backend of the replicas: the queue's pool, its listener and the app's pool. */
async function killReplicaBackends(url) {
  const rows = await tryQuery(
    url,
    `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name LIKE 'chaos-replica%'`,
  );
  return rows?.[0]?.n ?? 0;
}

/** Opens connections until the server refuses one (`refused`), then closes `leave` of them. */
async function hogConnections(url, leave) {
  const held = [];
  let refused = false;
  for (;;) {
    const c = new pg.Client({ connectionString: url, application_name: 'chaos-hog' });
    c.on('error', () => undefined);
    try {
      await c.connect();
      held.push(c);
    } catch (err) {
      refused = /too many clients|remaining connection slots/i.test(err.message);
      break;
    }
    if (held.length > 1000) break;
  }
  for (const c of held.splice(0, leave)) await c.end().catch(() => undefined);
  return { held, refused };
}

export const SCENARIOS = [
  {
    key: 'restart',
    title: '1. PostgreSQL restart',
    recoverWithinMs: 10_000,
    cutsConnections: true,
    async fault(ctx) {
      await ctx.restartServer(ctx.cfg.downMs);
      ctx.note(`server down ${ctx.cfg.downMs} ms (fast shutdown), then started again`);
    },
  },
  {
    key: 'backend-kill',
    title: '2. Backend kill',
    recoverWithinMs: 10_000,
    cutsConnections: true,
    async fault(ctx) {
      const until = Date.now() + ctx.cfg.faultMs;
      let rounds = 0;
      let killed = 0;
      let hit = 0;
      while (Date.now() < until) {
        const n = await killReplicaBackends(ctx.url);
        killed += n;
        hit += n > 0 ? 1 : 0;
        rounds++;
        await sleep(Math.min(1500, Math.max(0, until - Date.now())));
      }
      ctx.note(`${killed} backends terminated in ${rounds} rounds, every 1.5 s (${hit} rounds found some)`);
      // The replicas reconnect between rounds (their pools under load, the listener after its
      // backoff): a round that finds none is possible, most finding none means no fault.
      if (killed === 0 || hit < Math.ceil(rounds / 2)) {
        ctx.inconclusive(`only ${hit} of ${rounds} rounds found a replica backend to terminate (${killed} in all)`);
      }
    },
  },
  {
    key: 'pool-exhaustion',
    title: '3. Pool exhaustion',
    recoverWithinMs: 10_000,
    cutsConnections: true,
    async fault(ctx) {
      const { held, refused } = await hogConnections(ctx.url, 3);
      ctx.note(`another client held ${held.length} connections, leaving 3 free`);
      await sleep(ctx.cfg.faultMs);
      // Still held at the fault's end (a killed or dropped hog connection would have freed a slot).
      const alive = held.length
        ? Number(
            (await held[0].query(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'chaos-hog'`)).rows[0].n,
          )
        : 0;
      await Promise.all(held.map((c) => c.end().catch(() => undefined)));
      if (!refused)
        ctx.inconclusive(`the server never refused a connection (${held.length + 3} opened): the pool was not exhausted`);
      else if (held.length === 0 || alive !== held.length) {
        ctx.inconclusive(`of the ${held.length} connections held, ${alive} were still open at the fault's end`);
      }
    },
  },
  {
    key: 'crash',
    title: '4. Crash recovery',
    recoverWithinMs: 10_000,
    async fault(ctx) {
      const held = await ctx.killReplica(1);
      await sleep(ctx.cfg.faultMs);
      await ctx.startReplica(1);
      ctx.note(`SIGKILL of one replica holding ${held} jobs; restarted ${ctx.cfg.faultMs} ms later`);
    },
  },
  {
    key: 'repeated-kills',
    title: '5. Repeated kills',
    recoverWithinMs: 10_000,
    async fault(ctx) {
      const held = [];
      for (let i = 0; i < ctx.cfg.kills; i++) {
        held.push(await ctx.killReplica(1));
        await ctx.startReplica(1);
        await sleep(ctx.cfg.killEveryMs);
      }
      ctx.note(
        `${ctx.cfg.kills} SIGKILLs of one replica, every ${ctx.cfg.killEveryMs / 1000} s, each restarted at once; it held ${held.join(', ')} jobs`,
      );
    },
  },
  {
    key: 'idle-in-transaction',
    title: '6. Idle in transaction',
    async fault(ctx) {
      const c = await connect(ctx.url, 'chaos-idle-tx');
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await c.query('SELECT count(*) FROM pgqueue.jobs');
      await sleep(ctx.cfg.faultMs);
      await c.query('COMMIT');
      await c.end();
      ctx.note(`a REPEATABLE READ transaction sat idle for ${ctx.cfg.faultMs} ms, holding back the xmin horizon`);
    },
  },
  {
    key: 'active-readers',
    title: '7. Active readers',
    async fault(ctx) {
      const until = Date.now() + ctx.cfg.faultMs;
      let reads = 0;
      const reader = async (i) => {
        const c = await connect(ctx.url, `chaos-reader-${i}`);
        await sleep(i * 400); // staggered, so some snapshot is always open
        while (Date.now() < until) {
          await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
          await c.query(`SELECT count(*), sum(length(payload::text)) FROM pgqueue.jobs`);
          await c.query('SELECT pg_sleep(1.5)');
          await c.query(`SELECT count(*) FROM pgqueue.jobs WHERE state = 'waiting'`);
          await c.query('COMMIT');
          reads++;
        }
        await c.end();
      };
      await Promise.all([0, 1, 2, 3].map(reader));
      ctx.note(`4 sessions ran ${reads} REPEATABLE READ transactions of 1.5 s over the jobs table`);
    },
  },
  {
    key: 'high-load',
    title: '8. Sustained high load',
    async fault(ctx) {
      const from = await ctx.producer.request({ type: 'rate', perSec: ctx.cfg.highRate });
      const t = Date.now();
      await sleep(ctx.cfg.faultMs);
      const to = await ctx.producer.request({ type: 'rate', perSec: ctx.cfg.rate });
      const committedPerSec = Math.round(((to.committed - from.committed) * 1000) / (Date.now() - t));
      ctx.note(`offered ${ctx.cfg.highRate} jobs/s for ${ctx.cfg.faultMs} ms; the producer committed ${committedPerSec} jobs/s`);
      // The load is high only if it is well above the baseline's rate (the producer may fall short
      // of the offer on a small machine, but not down to the baseline).
      if (!(committedPerSec >= 2 * ctx.cfg.rate)) {
        ctx.inconclusive(
          `the producer committed ${committedPerSec} jobs/s during the fault, under twice the baseline's ${ctx.cfg.rate}`,
        );
      }
    },
  },
  {
    key: 'burst',
    title: '9. Event burst',
    async fault(ctx) {
      await ctx.producer.request({ type: 'burst', n: ctx.cfg.burst });
      ctx.note(`${ctx.cfg.burst} jobs in one transaction (one addBulk)`);
    },
  },
  ...[true, false].map((asyncCommit) => ({
    key: asyncCommit ? 'server-crash' : 'server-crash-sync',
    title: `${asyncCommit ? 10 : 11}. PostgreSQL crash (asyncCommit: ${asyncCommit})`,
    recoverWithinMs: 10_000,
    cutsConnections: true,
    replicaOptions: { asyncCommit },
    async fault(ctx) {
      const c = await ctx.crashServer(ctx.cfg.downMs);
      ctx.note(
        `every server process SIGKILLed at once under load, started again ${ctx.cfg.downMs} ms later ` +
          `(${c.recovered ? 'crash recovery ran' : 'NO crash recovery in the log'}); ${c.activeAtCrash} job(s) active in the recovered database`,
      );
    },
  })),
];
