import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import path from 'node:path';
import { Client } from 'pg';
import { QueueService, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { unexplainedRuns } from '../support/explained-runs';
import { afterRescuePass } from '../support/rescue-pass';
import { TcpProxy } from '../support/tcp-proxy';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { ROOT, startWorkerProcess, type Exit, type WorkerProcess } from '../support/worker-process';

// Several real worker processes (test/fixtures/worker-process.js, running the BUILT package from
// dist/) on one database: no job lost or run twice, a SIGKILLed worker's job rescued after its
// lease, and SIGTERM finishing short jobs while handing long ones back. Every assertion reads
// the database; logs are only shown to explain a failure.

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'worker-process.js');

const started: WorkerProcess[] = [];

interface WorkerEnv {
  concurrency: number;
  leaseMs?: number;
  heartbeatIntervalMs?: number;
  rescueIntervalMs?: number;
  pollIntervalMs?: number;
  shutdownTimeoutMs?: number;
  noWait?: boolean;
}

function startWorker(name: string, dbUrl: string, o: WorkerEnv): WorkerProcess {
  const env: Record<string, string | number> = { DB_URL: dbUrl, PGQ_CONCURRENCY: o.concurrency };
  const set = (key: string, v: number | undefined) => {
    if (v !== undefined) env[key] = v;
  };
  set('PGQ_LEASE_MS', o.leaseMs);
  set('PGQ_HEARTBEAT_MS', o.heartbeatIntervalMs);
  set('PGQ_RESCUE_MS', o.rescueIntervalMs);
  set('PGQ_POLL_MS', o.pollIntervalMs);
  set('PGQ_SHUTDOWN_MS', o.shutdownTimeoutMs);
  if (o.noWait) env.WORKER_NO_WAIT = '1';
  return startWorkerProcess(started, FIXTURE, name, env);
}

/** Resolves once the worker printed 'ready'; throws (with its output) if it exits first or takes too long. */
async function untilReady(w: WorkerProcess, timeoutMs = 20_000): Promise<void> {
  await waitFor(
    () => {
      if (w.exit) throw new Error(`${w.name} (pid ${w.pid}) exited during boot: ${JSON.stringify(w.exit)}\n${w.output()}`);
      return /^ready$/m.test(w.output());
    },
    { timeoutMs, intervalMs: 20, message: () => `${w.name} (pid ${w.pid}) to print "ready"; output so far:\n${w.output()}` },
  );
  if (w.exit) throw new Error(`${w.name} exited: ${JSON.stringify(w.exit)}\n${w.output()}`);
}

/** Sends `signal` and waits for the exit, failing (with the worker's output) after `timeoutMs`. */
async function stopWorker(w: WorkerProcess, signal: NodeJS.Signals, timeoutMs: number): Promise<Exit> {
  if (!w.exit) w.proc.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`${w.name} (pid ${w.pid}) did not exit within ${timeoutMs} ms of ${signal}; output:\n${w.output()}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([w.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `expect` the clean exit of a SIGTERMed worker, showing its output when it was not. */
function expectCleanExit(w: WorkerProcess, exit: Exit): void {
  if (exit.code !== 0 || exit.signal !== null) {
    throw new Error(`${w.name} (pid ${w.pid}) exited with ${JSON.stringify(exit)}, expected code 0; output:\n${w.output()}`);
  }
}

/** The pid in a `locked_by` (`host:pid:random`). */
function pidOf(lockedBy: string | null): number | null {
  const m = lockedBy ? /:(\d+):[0-9a-f]+$/.exec(lockedBy) : null;
  return m ? Number(m[1]) : null;
}

describe('several worker processes on one database', () => {
  let db: TestDatabase | undefined;
  let sql: Client | undefined;
  let producer: INestApplicationContext | undefined;

  const q = async <T extends object>(text: string, params: unknown[] = []): Promise<T[]> =>
    (await sql!.query(text, params)).rows as T[];
  const n = async (text: string, params: unknown[] = []): Promise<number> =>
    Number((await q<{ n: string | number }>(text, params))[0].n);

  /** The `runs` table the fixture writes, and a producer-only app (no workers), on `db`. */
  async function attachProducer(): Promise<QueueService> {
    sql = new Client({ connectionString: db!.url });
    await sql.connect();
    await sql.query(`CREATE TABLE runs (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL,
                       at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    producer = await bootApp({ options: { connection: db!.url, workers: false }, queues: [{ name: 'work' }] });
    await producer.init();
    return producer.get(QueueService);
  }

  /** A fresh database, prepared by attachProducer. */
  async function setUp(): Promise<QueueService> {
    db = await createTestDatabase();
    return attachProducer();
  }

  beforeAll(() => {
    assertBuilt();
  });

  afterEach(async () => {
    // Whatever a failed test left running; these are only the processes this file started.
    const alive = started.splice(0).filter((w) => !w.exit);
    for (const w of alive) w.proc.kill('SIGKILL');
    await Promise.all(alive.map((w) => w.exited));
    await producer?.close();
    producer = undefined;
    await sql?.end().catch(() => undefined);
    sql = undefined;
    await db?.drop();
    db = undefined;
  });

  it('three processes run 3,000 jobs: each exactly once, none lost, shared out; SIGTERM exits 0', async () => {
    const shutdownTimeoutMs = 5000;
    // The schema does not exist yet: three processes booting at once also race on the migration.
    db = await createTestDatabase();
    const workers = [1, 2, 3].map((i) =>
      startWorker(`worker-${i}`, db!.url, { concurrency: 10, pollIntervalMs: 1000, shutdownTimeoutMs }),
    );
    await Promise.all(workers.map((w) => untilReady(w)));
    const queues = await attachProducer();

    const ids: string[] = [];
    for (let batch = 0; batch < 3; batch++) {
      const jobs = Array.from({ length: 1000 }, (_, i) => ({ name: 'job', payload: { i: batch * 1000 + i } }));
      const added = await queues.addBulk('work', jobs);
      expect(added).toHaveLength(1000);
      ids.push(...added.map((j) => j.id));
    }
    expect(new Set(ids).size).toBe(3000);

    await waitFor(async () => (await n(`SELECT count(*) AS n FROM pgqueue.job_history WHERE state = 'completed'`)) >= 3000, {
      timeoutMs: 30_000,
      intervalMs: 100,
      message: async () =>
        `3000 completed jobs; now ${JSON.stringify(
          await q(`SELECT 'live' AS t, state, count(*) FROM pgqueue.jobs GROUP BY state
                   UNION ALL SELECT 'history', state, count(*) FROM pgqueue.job_history GROUP BY state`),
        )}; workers: ${workers.map((w) => `${w.name} ${JSON.stringify(w.exit)}`).join(', ')}`,
    });

    expect(await n('SELECT count(*) AS n FROM pgqueue.jobs')).toBe(0);
    expect(await n(`SELECT count(*) AS n FROM pgqueue.job_history WHERE state = 'completed'`)).toBe(3000);
    expect(await n(`SELECT count(*) AS n FROM pgqueue.job_history WHERE state <> 'completed'`)).toBe(0);
    // Exactly the enqueued jobs completed, and each ran: 3000 distinct enqueued jobs in runs.
    expect(await n(`SELECT count(*) AS n FROM pgqueue.job_history WHERE id = ANY($1::bigint[])`, [ids])).toBe(3000);
    expect(await n('SELECT count(DISTINCT job_id) AS n FROM runs')).toBe(3000);
    expect(await n('SELECT count(DISTINCT job_id) AS n FROM runs WHERE job_id = ANY($1::bigint[])', [ids])).toBe(3000);
    // Once each, unless a recorded error explains the second run: two processes never run one
    // attempt, and only a lease that lapsed (30 s here: a stall no healthy run sees) re-runs a job.
    expect(await unexplainedRuns(sql!, ids)).toEqual([]);
    // The work was shared, and only the worker processes did it.
    const byPid = await q<{ pid: number; runs: string }>('SELECT pid, count(*) AS runs FROM runs GROUP BY pid ORDER BY pid');
    expect(byPid.map((r) => r.pid).every((pid) => workers.some((w) => w.pid === pid))).toBe(true);
    expect(byPid.length).toBeGreaterThan(1);

    const exits = await Promise.all(workers.map((w) => stopWorker(w, 'SIGTERM', shutdownTimeoutMs + 5000)));
    workers.forEach((w, i) => expectCleanExit(w, exits[i]));
  }, 90_000);

  it('a SIGKILLed worker’s job is rescued after its lease and completed by another process (attempt 2)', async () => {
    const queues = await setUp();
    // A lease of 8 heartbeats: a loaded machine that delays a heartbeat by seconds must not let
    // the live holder's lease run out (a rescue then would be a second run, not the one tested).
    const timing = {
      leaseMs: 4000,
      heartbeatIntervalMs: 500,
      rescueIntervalMs: 300,
      pollIntervalMs: 250,
      shutdownTimeoutMs: 2000,
    };
    const pair = [
      startWorker('worker-a', db!.url, { concurrency: 2, ...timing }),
      startWorker('worker-b', db!.url, { concurrency: 2, ...timing }),
    ];
    await Promise.all(pair.map((w) => untilReady(w)));

    // Its first attempt runs until aborted (never, while its process lives); whichever process
    // claims it is the victim.
    const job = await queues.add('work', 'job', { waitFor: 'abort', waitOnAttempt: 1 });
    let holder: { locked_by: string; attempt: number } | undefined;
    await waitFor(
      async () => {
        [holder] = await q<{ locked_by: string; attempt: number }>(
          `SELECT locked_by, attempt FROM pgqueue.jobs WHERE id = $1 AND state = 'active'`,
          [job.id],
        );
        return holder !== undefined;
      },
      { timeoutMs: 20_000, message: 'a worker process to claim the job' },
    );
    expect(holder!.attempt).toBe(1);
    const victim = pair.find((w) => w.pid === pidOf(holder!.locked_by));
    const survivor = pair.find((w) => w !== victim)!;
    expect(victim).toBeDefined();

    // While its holder lives, heartbeats from that process keep the lease: renewed past its first
    // expiry (by the database's clock), and a rescue pass run after that expiry (the other
    // process's, or its own) leaves the job with it, on attempt 1.
    const [{ first }] = await q<{ first: Date }>('SELECT locked_until AS first FROM pgqueue.jobs WHERE id = $1', [job.id]);
    await waitFor(
      async () =>
        (await n('SELECT count(*) AS n FROM pgqueue.jobs WHERE id = $1 AND now() > $2 AND locked_until > $2', [
          job.id,
          first,
        ])) === 1,
      {
        timeoutMs: 20_000,
        message: 'the lease to be renewed past its first expiry',
      },
    );
    await afterRescuePass(sql!);
    const [row] = await q<{ locked_by: string; attempt: number; live: boolean }>(
      `SELECT locked_by, attempt, locked_until > now() AS live FROM pgqueue.jobs WHERE id = $1 AND state = 'active'`,
      [job.id],
    );
    expect(row).toEqual({ locked_by: holder!.locked_by, attempt: 1, live: true });

    const killed = await stopWorker(victim!, 'SIGKILL', 5000);
    expect(killed.signal).toBe('SIGKILL');

    await waitFor(async () => (await queues.getJob(job.id))?.state === 'completed', {
      timeoutMs: 20_000,
      intervalMs: 50,
      message: async () => `the job to complete after the lease expired; now ${JSON.stringify(await queues.getJob(job.id))}`,
    });
    const done = (await queues.getJob(job.id)) as Job;
    expect(done.attempt).toBe(2);
    expect(done.errors).toHaveLength(1);
    expect(done.errors[0]).toMatchObject({ attempt: 1, name: 'LeaseExpiredError' });
    // The handler finished once, on attempt 2, in the surviving process.
    expect(await q('SELECT job_id::text, attempt, pid FROM runs')).toEqual([{ job_id: job.id, attempt: 2, pid: survivor.pid }]);
    expect(await n('SELECT count(*) AS n FROM pgqueue.jobs')).toBe(0);

    expectCleanExit(survivor, await stopWorker(survivor, 'SIGTERM', timing.shutdownTimeoutMs + 5000));
  }, 90_000);

  it('a process killed after its handler returned, before the outcome was written: the job runs again after the lease', async () => {
    // Case 2 of docs/reliability.md, "Where a job can run twice". The fixture's handler returns a result that SIGKILLs the
    // process while the worker serialises it for the outcome write: the handler ran to the end,
    // its outcome never reached the database.
    const queues = await setUp();
    // A lease of 6 heartbeats, so the survivor's own run (attempt 2) keeps its lease on a loaded machine.
    const timing = {
      leaseMs: 3000,
      heartbeatIntervalMs: 500,
      rescueIntervalMs: 300,
      pollIntervalMs: 250,
      shutdownTimeoutMs: 2000,
    };
    const victim = startWorker('worker-a', db!.url, { concurrency: 2, ...timing });
    await untilReady(victim);
    const job = await queues.add('work', 'job', { dieAfterAttempt: 1 });
    await waitFor(() => victim.exit !== null, {
      timeoutMs: 20_000,
      message: () => `worker-a to die in its handler's completion; output:\n${victim.output()}`,
    });
    expect(victim.exit).toEqual({ code: null, signal: 'SIGKILL' });
    // The handler finished (its run is recorded), but the job is still active under the dead
    // process's lease, on attempt 1: nothing of the outcome was written.
    expect(await q('SELECT job_id::text, attempt, pid FROM runs')).toEqual([{ job_id: job.id, attempt: 1, pid: victim.pid }]);
    const [row] = await q<{ state: string; attempt: number; locked_by: string }>(
      'SELECT state, attempt, locked_by FROM pgqueue.jobs WHERE id = $1',
      [job.id],
    );
    expect({ ...row, pid: pidOf(row.locked_by) }).toEqual({
      state: 'active',
      attempt: 1,
      locked_by: row.locked_by,
      pid: victim.pid,
    });

    // Another process's rescuer hands it back once the lease expired, and it runs again.
    const survivor = startWorker('worker-b', db!.url, { concurrency: 2, ...timing });
    await untilReady(survivor);
    await waitFor(async () => (await queues.getJob(job.id))?.state === 'completed', {
      timeoutMs: 20_000,
      intervalMs: 50,
      message: async () => `the job to run again after the lease expired; now ${JSON.stringify(await queues.getJob(job.id))}`,
    });
    const done = (await queues.getJob(job.id)) as Job;
    expect(done.attempt).toBe(2);
    expect(done.errors).toEqual([expect.objectContaining({ attempt: 1, name: 'LeaseExpiredError' })]);
    expect(await q('SELECT job_id::text, attempt, pid FROM runs ORDER BY attempt')).toEqual([
      { job_id: job.id, attempt: 1, pid: victim.pid },
      { job_id: job.id, attempt: 2, pid: survivor.pid },
    ]);
    expectCleanExit(survivor, await stopWorker(survivor, 'SIGTERM', timing.shutdownTimeoutMs + 5000));
  }, 90_000);

  it('SIGTERM lets short jobs finish and hands a long one back uncounted; another process completes it', async () => {
    const queues = await setUp();
    // The grace period only has to cover the short jobs' last step (one INSERT and their outcome
    // writes) after the signal: what they wait for before that is the signal itself.
    const shutdownTimeoutMs = 3000;
    // A long lease: only a hand-back (not the rescuer) can make the long job available again in time.
    const a = startWorker('worker-a', db!.url, { concurrency: 4, pollIntervalMs: 250, leaseMs: 30_000, shutdownTimeoutMs });
    await untilReady(a);

    // The long job runs until the shutdown deadline aborts it; the short ones until SIGTERM, so
    // all four are running when the signal comes, however slow the machine.
    const long = await queues.add('work', 'job', { waitFor: 'abort' });
    const shorts = await queues.addBulk(
      'work',
      [1, 2, 3].map(() => ({ name: 'job', payload: { waitFor: 'sigterm' } })),
    );
    const running = [long.id, ...shorts.map((j) => j.id)];
    await waitFor(
      async () =>
        (await n(`SELECT count(*) AS n FROM pgqueue.jobs WHERE state = 'active' AND id = ANY($1::bigint[])`, [running])) === 4,
      { timeoutMs: 20_000, intervalMs: 10, message: 'worker-a to run the long job and the 3 short ones' },
    );
    // More jobs while every slot is taken: they must still be waiting (never claimed) or completed.
    const queued = await queues.addBulk(
      'work',
      [1, 2, 3, 4].map(() => ({ name: 'job', payload: { waitFor: 'sigterm' } })),
    );
    const all = [...running, ...queued.map((j) => j.id)];

    const [{ at: sigtermAt }] = await q<{ at: Date }>('SELECT clock_timestamp() AS at');
    const exit = await stopWorker(a, 'SIGTERM', shutdownTimeoutMs + 5000);
    expectCleanExit(a, exit);

    // The short jobs that were running finished after the signal, in worker-a, and completed.
    const shortRuns = await q<{ job_id: string; attempt: number; pid: number; after_sigterm: boolean }>(
      `SELECT job_id::text, attempt, pid, at > $2 AS after_sigterm FROM runs WHERE job_id = ANY($1::bigint[]) ORDER BY job_id`,
      [shorts.map((j) => j.id), sigtermAt],
    );
    expect(shortRuns).toEqual(shorts.map((j) => ({ job_id: j.id, attempt: 1, pid: a.pid, after_sigterm: true })));
    for (const j of shorts) expect(await queues.getJob(j.id)).toMatchObject({ state: 'completed', attempt: 1, errors: [] });

    // The long one was handed back: waiting, unlocked, its interrupted attempt not counted.
    expect(await queues.getJob(long.id)).toMatchObject({ state: 'waiting', attempt: 0, errors: [] });
    expect(
      await n('SELECT count(*) AS n FROM pgqueue.jobs WHERE id = $1 AND locked_by IS NULL AND locked_until IS NULL', [long.id]),
    ).toBe(1);
    expect(await n('SELECT count(*) AS n FROM runs WHERE job_id = $1', [long.id])).toBe(0);
    // Nothing is left active, and nothing is lost: every job is completed or waiting untouched.
    expect(await n(`SELECT count(*) AS n FROM pgqueue.jobs WHERE state = 'active'`)).toBe(0);
    const live = await n(
      `SELECT count(*) AS n FROM pgqueue.jobs WHERE id = ANY($1::bigint[]) AND state = 'waiting' AND attempt = 0`,
      [all],
    );
    const completed = await n(
      `SELECT count(*) AS n FROM pgqueue.job_history WHERE id = ANY($1::bigint[]) AND state = 'completed'`,
      [all],
    );
    expect(live + completed).toBe(all.length);

    // A second process (that does not sleep) picks the long job up and completes the rest.
    const b = startWorker('worker-b', db!.url, {
      concurrency: 4,
      pollIntervalMs: 250,
      leaseMs: 30_000,
      shutdownTimeoutMs,
      noWait: true,
    });
    await untilReady(b);
    await waitFor(
      async () =>
        (await n(`SELECT count(*) AS n FROM pgqueue.job_history WHERE id = ANY($1::bigint[]) AND state = 'completed'`, [all])) ===
        all.length,
      {
        timeoutMs: 20_000,
        intervalMs: 50,
        message: async () =>
          `all ${all.length} jobs to complete; live: ${JSON.stringify(await q('SELECT id, state, attempt FROM pgqueue.jobs'))}`,
      },
    );
    expect(await queues.getJob(long.id)).toMatchObject({ state: 'completed', attempt: 1, errors: [] });
    expect(await q('SELECT job_id::text, attempt, pid FROM runs WHERE job_id = $1', [long.id])).toEqual([
      { job_id: long.id, attempt: 1, pid: b.pid },
    ]);
    expect(await n('SELECT count(*) AS n FROM runs')).toBe(all.length);
    expect(await n('SELECT count(DISTINCT job_id) AS n FROM runs WHERE job_id = ANY($1::bigint[])', [all])).toBe(all.length);
    expect(await n('SELECT count(*) AS n FROM pgqueue.jobs')).toBe(0);

    expectCleanExit(b, await stopWorker(b, 'SIGTERM', shutdownTimeoutMs + 5000));
  }, 90_000);

  it('a worker-only process stays up while its database is unreachable, and runs jobs again once it is back', async () => {
    // Its only connections go through a proxy the test cuts: the pool and the listener lose
    // every socket, and reconnects are refused. Before the fix, nothing then held the event
    // loop (every engine timer was unref'd) and the process exited with code 0 mid-outage.
    const queues = await setUp();
    const proxy = await TcpProxy.forUrl(db!.url);
    try {
      const w = startWorker('cut-off', proxy.urlThrough(db!.url), { concurrency: 2, pollIntervalMs: 200 });
      await untilReady(w);
      await proxy.stop();
      // Ten failed polls with no database (each one logged): claims fail, the listener retries, the process lives.
      const failedClaims = () =>
        w
          .output()
          .split('\n')
          .filter((l) => / ERROR pg-queue: .*ECONNREFUSED/.test(l)).length;
      const before = failedClaims();
      await waitFor(() => w.exit !== null || failedClaims() >= before + 10, {
        timeoutMs: 20_000,
        intervalMs: 50,
        message: () => `ten failed polls to be logged; output:\n${w.output()}`,
      });
      expect(w.exit).toBeNull();
      const job = await queues.add('work', 'job', {});
      await proxy.start();
      await waitFor(async () => (await n('SELECT count(*) AS n FROM runs WHERE job_id = $1', [job.id])) === 1, {
        timeoutMs: 20_000,
        message: () => `the job to run after the outage; worker output:\n${w.output()}`,
      });
      expectCleanExit(w, await stopWorker(w, 'SIGTERM', 10_000));
    } finally {
      await proxy.stop();
    }
  }, 90_000);
});
