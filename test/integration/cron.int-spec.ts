import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, getQueueToken, type Job, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Recurring jobs: one job per tick with three nodes, ticks missed while no node ran caught up
// once after a restart, and bad expressions refused at boot. A six-field expression ticks every
// second, so the tests take seconds, not minutes.

const ticks: { node: string; runAt: number; payload: unknown }[] = [];

function cronProcessor(node: string) {
  @Processor('cron')
  class CronProcessor {
    @Process({ name: 'every-second', cron: '* * * * * *' })
    run(job: Job) {
      ticks.push({ node, runAt: job.runAt.getTime(), payload: job.payload });
    }
  }
  return CronProcessor;
}

describe('recurring jobs', () => {
  const t = useTestDatabase();

  const tickRows = async () =>
    (
      await t.pool.query(
        `SELECT extract(epoch FROM run_at)::float8 * 1000 AS run_at FROM pgqueue.jobs WHERE name = 'every-second'
         UNION ALL SELECT extract(epoch FROM run_at)::float8 * 1000 FROM pgqueue.job_history WHERE name = 'every-second' ORDER BY 1`,
      )
    ).rows.map((r) => Number(r.run_at));

  it('three nodes running one schedule enqueue each tick exactly once, with no tick skipped', async () => {
    const options = { connection: t.db.url, pollIntervalMs: 100 };
    const nodes: INestApplicationContext[] = [];
    for (const n of ['a', 'b', 'c'])
      nodes.push(await bootApp({ options, queues: [{ name: 'cron' }], providers: [cronProcessor(n)] }));
    try {
      await waitFor(async () => (await tickRows()).length >= 4, { timeoutMs: 20_000, message: 'four ticks' });
    } finally {
      for (const n of nodes) await n.close();
    }
    const runAts = await tickRows();
    expect(new Set(runAts).size).toBe(runAts.length); // no tick twice
    for (let i = 1; i < runAts.length; i++) expect(runAts[i] - runAts[i - 1]).toBe(1000); // none skipped
    expect(runAts.every((r) => r % 1000 === 0)).toBe(true); // on the second, as the expression says
  });

  it('a restart catches up the ticks missed while no node ran, each once', async () => {
    const options = { connection: t.db.url, pollIntervalMs: 100, cronCatchUpMs: 60_000 };
    let app = await bootApp({ options, queues: [{ name: 'cron' }], providers: [cronProcessor('before')] });
    await waitFor(async () => (await tickRows()).length >= 6, { timeoutMs: 20_000 });
    await app.close();
    // Downtime without waiting for it: the last three ticks never happened (their jobs gone, the
    // stored next tick moved back to the first of them), as if no node had run for three seconds.
    const ran = await tickRows();
    const missed = ran.slice(-3);
    const lastKept = ran[ran.length - 4];
    for (const table of ['jobs', 'job_history']) {
      await t.pool.query(`DELETE FROM pgqueue.${table} WHERE name = 'every-second' AND run_at >= to_timestamp($1 / 1000.0)`, [
        missed[0],
      ]);
    }
    await t.pool.query(
      `UPDATE pgqueue.job_schedulers SET next_run_at = to_timestamp($1 / 1000.0) WHERE queue = 'cron' AND id = 'every-second'`,
      [lastKept + 1000],
    );
    app = await bootApp({ options, queues: [{ name: 'cron' }], providers: [cronProcessor('after')] });
    try {
      await waitFor(async () => (await tickRows()).length >= ran.length + 2, { timeoutMs: 20_000 });
    } finally {
      await app.close();
    }
    const runAts = await tickRows();
    expect(runAts).toEqual(expect.arrayContaining(missed));
    expect(new Set(runAts).size).toBe(runAts.length);
    for (let i = 1; i < runAts.length; i++) expect(runAts[i] - runAts[i - 1]).toBe(1000);
  });

  it('upgrading from cron_schedules (migration 6): ticks older than cronCatchUpMs are skipped and each newer missed one is enqueued once', async () => {
    @Processor('cronwin')
    class EveryMinute {
      @Process({ name: 'every-minute', cron: '0 * * * * *' })
      run() {
        return undefined;
      }
    }
    const windowMs = 5 * 60_000;
    // The schedule last ticked 30 minutes ago, before the upgrade (in cron_schedules): 30 ticks were
    // missed, only those of the last 5 minutes are due.
    await t.pool.query(
      `INSERT INTO pgqueue.cron_schedules (key, last_tick) VALUES ('cronwin/every-minute', date_trunc('minute', now()) - interval '30 minutes')`,
    );
    const bootedAfter = Date.now();
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100, cronCatchUpMs: windowMs },
      queues: [{ name: 'cronwin' }],
      providers: [EveryMinute],
    });
    await app.init();
    const latest = Math.floor(bootedAfter / 60_000) * 60_000; // the newest tick due at boot
    const stored = async () =>
      (
        await t.pool.query(
          `SELECT extract(epoch FROM run_at)::float8 * 1000 AS run_at FROM pgqueue.jobs WHERE name = 'every-minute'
           UNION ALL SELECT extract(epoch FROM run_at)::float8 * 1000 FROM pgqueue.job_history WHERE name = 'every-minute' ORDER BY 1`,
        )
      ).rows.map((r) => Number(r.run_at));
    let caughtUpBy = 0;
    try {
      await waitFor(async () => (await stored()).includes(latest), {
        timeoutMs: 20_000,
        message: 'the catch-up to reach the newest due tick',
      });
      caughtUpBy = Date.now();
    } finally {
      await app.close();
    }
    const runAts = await stored();
    expect(new Set(runAts).size).toBe(runAts.length); // each once
    for (let i = 1; i < runAts.length; i++) expect(runAts[i] - runAts[i - 1]).toBe(60_000); // none in the window skipped
    // Nothing older than the window (whatever moment within the boot the catch-up took as now)...
    expect(runAts[0]).toBeGreaterThan(bootedAfter - windowMs);
    // ... and the window's oldest tick is there: the catch-up reached back the whole window.
    expect(runAts[0]).toBeLessThanOrEqual(caughtUpBy - windowMs + 60_000);
  });

  it('registerQueue({ repeat }) schedules a job with its payload', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [
        {
          name: 'cron',
          repeat: [{ name: 'every-second', cron: '* * * * * *', tz: 'Europe/Berlin', payload: { report: 'daily' } }],
        },
      ],
      providers: [cronProcessor('repeat')],
    }).catch((err: Error) => err);
    // The same job is scheduled by the processor's @Process({ cron }) too: refused at boot.
    expect(app).toBeInstanceOf(Error);
    expect((app as Error).message).toMatch(/scheduled twice/);

    @Processor('cron2')
    class Plain {
      @Process('report')
      run(job: Job) {
        ticks.push({ node: 'repeat', runAt: job.runAt.getTime(), payload: job.payload });
      }
    }
    const ok = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [
        { name: 'cron2', repeat: [{ name: 'report', cron: '* * * * * *', tz: 'Europe/Berlin', payload: { report: 'daily' } }] },
      ],
      providers: [Plain],
    });
    try {
      await waitFor(() => ticks.some((x) => x.node === 'repeat'), { timeoutMs: 5000 });
      expect(ticks.find((x) => x.node === 'repeat')?.payload).toEqual({ report: 'daily' });
    } finally {
      await ok.close();
    }
  });

  it("code-declared schedules are job_schedulers rows, reconciled at boot: one no longer declared by the app that handles its queue is removed, another app's are kept", async () => {
    @Processor('recon')
    class Recon {
      @Process('a')
      a() {}
      @Process('b')
      b() {}
    }
    const boot = (repeat: { name: string; cron: string }[], workers = true) =>
      bootApp({
        options: { connection: t.db.url, workers },
        queues: [
          { name: 'recon', repeat },
          { name: 'other', repeat: workers ? [] : [{ name: 'api-only', cron: '0 4 * * *' }] },
        ],
        providers: workers ? [Recon] : [],
      });
    const rows = async () =>
      (
        await t.pool.query<{ queue: string; id: string; pattern: string; source: string }>(
          `SELECT queue, id, pattern, source FROM pgqueue.job_schedulers WHERE queue IN ('recon', 'other') ORDER BY queue, id`,
        )
      ).rows;
    let app = await boot([
      { name: 'a', cron: '0 3 * * *' },
      { name: 'b', cron: '0 5 * * *' },
    ]);
    await app.init();
    await app.close();
    // A runtime scheduler of the same queue is never touched by the reconcile.
    await t.pool.query(
      `INSERT INTO pgqueue.job_schedulers (queue, id, every_ms, job_name, next_run_at) VALUES ('recon', 'runtime-1', 60000, 'a', now() + interval '1 day')`,
    );
    // A row of queue 'other', declared in code by an app that runs no worker for it (say an API):
    // this app does not own 'other', so its rows stay whatever this app declares.
    await t.pool.query(
      `INSERT INTO pgqueue.job_schedulers (queue, id, pattern, job_name, next_run_at, source) VALUES ('other', 'elsewhere', '0 1 * * *', 'x', now() + interval '1 day', 'code')`,
    );
    const before = (await rows()).find((r) => r.id === 'a');
    expect(before).toEqual({ queue: 'recon', id: 'a', pattern: '0 3 * * *', source: 'code' });
    const nextOfA = (await t.pool.query(`SELECT next_run_at FROM pgqueue.job_schedulers WHERE id = 'a'`)).rows[0].next_run_at;
    // The next version: b removed from code, a unchanged.
    app = await boot([{ name: 'a', cron: '0 3 * * *' }]);
    await app.init();
    await app.close();
    expect(await rows()).toEqual([
      { queue: 'other', id: 'elsewhere', pattern: '0 1 * * *', source: 'code' },
      { queue: 'recon', id: 'a', pattern: '0 3 * * *', source: 'code' },
      { queue: 'recon', id: 'runtime-1', pattern: null, source: 'runtime' },
    ]);
    // Unchanged timing: its next tick kept (a restart neither reruns nor skips one).
    expect((await t.pool.query(`SELECT next_run_at FROM pgqueue.job_schedulers WHERE id = 'a'`)).rows[0].next_run_at).toEqual(
      nextOfA,
    );
    // A producer-only app's boot removes nothing, whatever it declares.
    app = await boot([], false);
    await app.init();
    await app.close();
    expect((await rows()).map((r) => r.id)).toEqual(['elsewhere', 'a', 'runtime-1']);
    // A runtime upsert may not take a code-declared id.
    app = await boot([{ name: 'a', cron: '0 3 * * *' }]);
    await app.init();
    try {
      const q = app.get<Queue>(getQueueToken('recon'));
      await expect(q.upsertJobScheduler('a', { every: 60_000 }, { name: 'a' })).rejects.toThrow(
        /declared in code .* holds this id/,
      );
    } finally {
      await app.close();
    }
  });

  it('refuses a bad expression or time zone at boot, saying what to write', async () => {
    const boot = (cron: string, tz?: string) =>
      bootApp({ options: { connection: t.db.url }, queues: [{ name: 'bad', repeat: [{ name: 'x', cron, tz }] }] });
    await expect(boot('61 * * * *')).rejects.toThrow(/cron "61 \* \* \* \*" is not valid.*five fields/);
    await expect(boot('0 3 * * *', 'Mars/Olympus')).rejects.toThrow(/time zone "Mars\/Olympus"/);
  });
});
