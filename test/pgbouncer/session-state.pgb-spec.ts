import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import { Process, Processor, QueueService, type Job, type PgQueueModuleOptions } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';
import { bouncerAdmin, pgBouncerMode, throughPgBouncer } from '../support/pgbouncer';

// Two nodes share a PgBouncer pool of TWO server connections (transaction mode), so every
// transaction of one node may run on a connection the other node's last transaction used. Under
// many concurrent claims, enqueues (plain and with unique keys), cron ticks, the limits' advisory
// transaction locks and the maintenance election, nothing may stay behind on those connections:
// no advisory lock held outside a transaction, no prepared statement, no changed setting. Run by
// `npm test` with PGQUEUE_TEST_PGBOUNCER (the PgBouncer with the pool of 2 is started there).

const runs = new Map<string, number>();
const ran = (job: Job) => runs.set(job.id, (runs.get(job.id) ?? 0) + 1);

@Processor('plain')
class PlainProcessor {
  @Process()
  run(job: Job) {
    ran(job);
  }
}

@Processor('limited')
class LimitedProcessor {
  @Process()
  run(job: Job) {
    ran(job);
  }
}

@Processor('ticks')
class TicksProcessor {
  @Process()
  run(job: Job) {
    ran(job);
  }
}

interface ServerState {
  pid: number;
  prepared: number;
  synchronousCommit: string;
  searchPath: string;
  advisoryHeld: number;
}

// What one server connection carries: asked through PgBouncer, so it lands on whichever of the
// two server connections is free, between the queue's transactions.
const STATE_SQL = `SELECT pg_backend_pid() AS pid,
  (SELECT count(*) FROM pg_prepared_statements)::int AS prepared,
  current_setting('synchronous_commit') AS "synchronousCommit",
  current_setting('search_path') AS "searchPath",
  (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::int AS "advisoryHeld"`;

describe('two nodes through a PgBouncer pool of 2: no session state leaks between them', () => {
  const t = useTestDatabase();
  const tightUrl = process.env.PGQUEUE_TEST_PGBOUNCER_TIGHT_URL;
  const adminUrl = (): string => {
    const u = new URL(tightUrl!);
    u.pathname = '/pgbouncer';
    return u.toString();
  };
  let defaults: { synchronousCommit: string; searchPath: string };

  beforeAll(async () => {
    if (!tightUrl)
      throw new Error('PGQUEUE_TEST_PGBOUNCER_TIGHT_URL is not set: run through `npm test` with PGQUEUE_TEST_PGBOUNCER');
    const { rows } = await t.pool.query<{ synchronousCommit: string; searchPath: string }>(
      `SELECT current_setting('synchronous_commit') AS "synchronousCommit", current_setting('search_path') AS "searchPath"`,
    );
    defaults = rows[0];
  });

  const admin = <T>(sql: string): Promise<T[]> => bouncerAdmin<T>(adminUrl(), sql);

  const serversOf = async (): Promise<number> =>
    (await admin<{ database: string }>('SHOW SERVERS')).filter((s) => s.database === t.db.name).length;
  const clientsOf = async (): Promise<number> =>
    (await admin<{ database: string }>('SHOW CLIENTS')).filter((s) => s.database === t.db.name).length;

  it('many concurrent claims, enqueues, cron ticks, limit locks and maintenance passes leave no lock, statement or setting behind', async () => {
    const through = throughPgBouncer(t.db.url, tightUrl);
    expect(new URL(through).port).not.toBe(new URL(t.db.url).port);
    const options: PgQueueModuleOptions = {
      connection: through,
      preparedStatements: false,
      ...(pgBouncerMode() === 'poll-only' ? { listen: false } : { listenConnection: t.db.url }),
      pollIntervalMs: 100,
      rescueIntervalMs: 100, // a maintenance election every 100 ms on each node
      vacuumAtDeadTuples: 200,
    };
    const queues = [
      { name: 'plain', concurrency: 20 },
      { name: 'limited', concurrency: 10, globalConcurrency: 4, limiter: { max: 10_000, durationMs: 1000 } },
      { name: 'ticks', repeat: [{ name: 'every-second', cron: '* * * * * *' }] },
    ];
    const providers = [PlainProcessor, LimitedProcessor, TicksProcessor];
    const nodes: INestApplicationContext[] = [];
    const samples: ServerState[] = [];
    let maxServers = 0;
    let maxClients = 0;
    let sampling = true;
    const sampler = (async () => {
      const c = new Client({ connectionString: through });
      await c.connect();
      try {
        while (sampling) {
          samples.push((await c.query<ServerState>(STATE_SQL)).rows[0]);
          maxServers = Math.max(maxServers, await serversOf());
          maxClients = Math.max(maxClients, await clientsOf());
        }
      } finally {
        await c.end();
      }
    })();
    try {
      for (let i = 0; i < 2; i++) {
        const app = await bootApp({ options, queues, providers });
        await app.init();
        nodes.push(app);
      }
      const PER_NODE = 300;
      const plain: string[] = [];
      const limited: string[] = [];
      await Promise.all(
        nodes.map(async (node, n) => {
          const q = node.get(QueueService);
          const adds = Array.from({ length: PER_NODE }, (_, i) =>
            q.add('plain', 'p', { n, i }, i % 3 === 0 ? { uniqueKey: `k-${n}-${i}` } : {}).then((j) => plain.push(j.id)),
          );
          const bulk = q.addBulk(
            'limited',
            Array.from({ length: PER_NODE / 2 }, (_, i) => ({ name: 'l', payload: { n, i } })),
          );
          await Promise.all(adds);
          limited.push(...(await bulk).map((j) => j.id));
        }),
      );
      const ticksBefore = async () =>
        (
          await t.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'ticks' AND state = 'completed'`,
          )
        ).rows[0].n;
      await waitFor(
        async () =>
          (
            await t.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue IN ('plain', 'limited') AND state = 'completed'`,
            )
          ).rows[0].n ===
            plain.length + limited.length && (await ticksBefore()) >= 2,
        {
          timeoutMs: 60_000,
          message: async () =>
            `all ${plain.length + limited.length} jobs and two cron ticks to complete (runs so far: ${runs.size})`,
        },
      );
      expect(plain).toHaveLength(2 * PER_NODE);
      expect(limited).toHaveLength(PER_NODE);
      for (const id of [...plain, ...limited]) expect([id, runs.get(id)]).toEqual([id, 1]);
      // Maintenance ran through the pool too: the vacuum threshold was crossed and someone won the election.
      await waitFor(
        async () =>
          (
            await t.pool.query<{ n: number }>(
              `SELECT vacuum_count::int AS n FROM pg_stat_user_tables WHERE schemaname = 'pgqueue' AND relname = 'jobs'`,
            )
          ).rows[0].n > 0,
        { timeoutMs: 30_000, message: 'the maintenance node to vacuum the jobs table (through the pool)' },
      );
    } finally {
      sampling = false;
      await sampler;
      for (const app of nodes) await app.close();
    }

    // The pool held: 2 server connections, for many more clients (2 nodes x 4, and the sampler).
    expect(maxServers).toBeLessThanOrEqual(2);
    expect(maxClients).toBeGreaterThan(2);
    // Between transactions, every server connection looked like a fresh one.
    expect(samples.length).toBeGreaterThan(10);
    const dirty = samples.filter(
      (s) =>
        s.prepared !== 0 ||
        s.advisoryHeld !== 0 ||
        s.synchronousCommit !== defaults.synchronousCommit ||
        s.searchPath !== defaults.searchPath,
    );
    expect(dirty).toEqual([]);

    // After the nodes stopped, both server connections, held at once so each is seen.
    const a = new Client({ connectionString: through });
    const b = new Client({ connectionString: through });
    await a.connect();
    await b.connect();
    try {
      await a.query('BEGIN');
      await b.query('BEGIN');
      const seen = [(await a.query<ServerState>(STATE_SQL)).rows[0], (await b.query<ServerState>(STATE_SQL)).rows[0]];
      expect(new Set(seen.map((s) => s.pid)).size).toBe(2);
      for (const s of seen) {
        expect({ ...s, pid: 0 }).toEqual({ pid: 0, prepared: 0, advisoryHeld: 0, ...defaults });
      }
      await a.query('COMMIT');
      await b.query('COMMIT');
    } finally {
      await a.end();
      await b.end();
    }
    // And no advisory lock anywhere on the database once nothing runs.
    const { rows: locks } = await t.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()`,
    );
    expect(locks[0].n).toBe(0);
  }, 120_000);
});
