import 'reflect-metadata';
import { Process, Processor, QueueService, ShutdownError, type ActiveJob } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';
import { queueConnectionsLeft } from '../support/pgbouncer';

const events: string[] = [];
const reasons = new Map<string, unknown>();

/** Opened by the test once the shutdown began: a job with `gated` runs until then, however slow the machine. */
let openGate: () => void = () => undefined;
const gate = new Promise<void>((resolve) => (openGate = resolve));

@Processor('work')
class WorkProcessor {
  @Process()
  async run(job: ActiveJob<{ ms: number; tag: string; gated?: boolean }>) {
    events.push(`start:${job.payload.tag}`);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, job.payload.ms);
      if (job.payload.gated)
        void gate.then(() => {
          clearTimeout(t);
          resolve();
        });
      job.signal.addEventListener('abort', () => {
        reasons.set(job.payload.tag, job.signal.reason);
        clearTimeout(t);
        resolve();
      });
    });
    events.push(`end:${job.payload.tag}`);
  }
}

describe('graceful shutdown on app.close()', () => {
  const t = useTestDatabase();

  const boot = (shutdownTimeoutMs: number) =>
    bootApp({
      options: { connection: t.db.url, shutdownTimeoutMs, pollIntervalMs: 100 },
      queues: [{ name: 'work', concurrency: 5 }],
      providers: [WorkProcessor],
    });

  it('lets short jobs finish, hands long ones back uncounted, and another worker completes them', async () => {
    // The grace period only has to cover the short jobs' ends once the gate opens (in-process,
    // no wait of their own) and their outcome writes: 10 s, which a loaded 2-core machine does
    // not use up (3 s was the margin before), and which the long job below waits out once.
    const app = await boot(10_000);
    const queues = app.get(QueueService);
    // The short jobs run until the test opens the gate, after the shutdown began: still running
    // when it starts, whatever the machine's speed.
    const short = await queues.addBulk(
      'work',
      [1, 2, 3].map((i) => ({ name: 'w', payload: { ms: 60_000, gated: true, tag: `short${i}` } })),
    );
    const long = await queues.add('work', 'w', { ms: 60_000, tag: 'long' });
    await waitFor(() => ['short1', 'short2', 'short3', 'long'].every((t) => events.includes(`start:${t}`)), {
      message: 'all four jobs to start',
      timeoutMs: 20_000,
    });
    // close() returns without waiting out the 60 s job: the grace period ended it (ShutdownError below).
    const closing = app.close();
    await waitFor(() => !runtimeOf(app).supervisor.running, { message: 'the workers to begin stopping', timeoutMs: 20_000 });
    events.push('shutdown-began');
    openGate();
    await closing;
    // Each short job ended after the shutdown began, in the grace period, and was not interrupted.
    const began = events.indexOf('shutdown-began');
    for (const tag of ['short1', 'short2', 'short3']) {
      expect(events.indexOf(`end:${tag}`)).toBeGreaterThan(began);
      expect(reasons.has(tag)).toBe(false);
    }
    for (const j of short)
      expect((await t.pool.query('SELECT state FROM pgqueue.job_history WHERE id = $1', [j.id])).rows[0]?.state).toBe(
        'completed',
      );
    expect(reasons.get('long')).toBeInstanceOf(ShutdownError);
    const back = (await t.pool.query('SELECT state, attempt, locked_by FROM pgqueue.jobs WHERE id = $1', [long.id])).rows[0];
    expect(back).toEqual({ state: 'waiting', attempt: 0, locked_by: null });
    // The pool is closed: no connection of the closed app is left on the server (or in PgBouncer).
    expect(await queueConnectionsLeft(t.pool)).toBe(0);

    // The next worker takes the job at once and, this time, lets it finish quickly.
    await t.pool.query(`UPDATE pgqueue.jobs SET payload = '{"ms": 10, "tag": "long-again"}' WHERE id = $1`, [long.id]);
    const next = await boot(1000);
    try {
      await waitFor(async () => (await next.get(QueueService).getJob(long.id))?.state === 'completed', { timeoutMs: 20_000 });
      expect((await next.get(QueueService).getJob(long.id))!.attempt).toBe(1);
    } finally {
      await next.close();
    }
  }, 60_000);

  it('a job handed back at shutdown wakes another worker at once, by NOTIFY, not at its poll', async () => {
    const a = await boot(200);
    const queues = a.get(QueueService);
    const job = await queues.add('work', 'w', { ms: 60_000, tag: 'handed' });
    await waitFor(() => events.includes('start:handed'), { message: 'the job to start on A', timeoutMs: 20_000 });
    // B polls every 10 minutes: within this test, only a notification can make it claim.
    const b = await bootApp({
      options: { connection: t.db.url, shutdownTimeoutMs: 200, pollIntervalMs: 600_000 },
      queues: [{ name: 'work', concurrency: 5 }],
      providers: [WorkProcessor],
    });
    try {
      await waitFor(() => runtimeOf(b).supervisor.listenerState?.connected === true, {
        message: "B's listener to connect",
        timeoutMs: 20_000,
      });
      await a.close();
      const owner = async () => {
        const sql = 'SELECT locked_by FROM pgqueue.jobs WHERE id = $1';
        const { rows } = await t.pool.query<{ locked_by: string | null }>(sql, [job.id]);
        return rows[0]?.locked_by;
      };
      await waitFor(async () => (await owner()) === runtimeOf(b).supervisor.workerId, {
        timeoutMs: 20_000,
        message: async () => `B to take the handed-back job (locked_by: ${await owner()})`,
      });
      expect(events.filter((e) => e === 'start:handed')).toHaveLength(2);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);
});
