import 'reflect-metadata';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  BatchError,
  PgQueueConfigError,
  PgQueueModule,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type Job,
} from '../../lib';
import { PgQueueTester, PgQueueTestingModule } from '../../lib/testing';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

/** Every call's job ids, per queue, in call order. */
const calls = new Map<string, string[][]>();
function record(queue: string, jobs: readonly Job[]): void {
  calls.set(queue, [...(calls.get(queue) ?? []), jobs.map((j) => j.id)]);
}
const callsOf = (queue: string) => calls.get(queue) ?? [];
const jobsCalled = (queue: string) => callsOf(queue).reduce((n, c) => n + c.length, 0);

@Processor('mixed')
class MixedProcessor {
  /** Fails the jobs whose payload says so, on their first attempt only; returns a result for each of the others. */
  @Process({ name: 'send', batch: { size: 100, waitMs: 200 } })
  send(jobs: ActiveJob<{ i: number; failFirst?: boolean }>[]) {
    record('mixed', jobs);
    const errors = new Map<number, Error>();
    jobs.forEach((job, index) => {
      if (job.payload.failFirst && job.attempt === 1) errors.set(index, new Error(`bad ${job.payload.i}`));
    });
    const results = jobs.map((job) => ({ sent: job.payload.i, attempt: job.attempt }));
    if (errors.size) throw new BatchError(errors, { results });
    return results;
  }
}

@Processor('broken')
class BrokenProcessor {
  @Process({ name: 'all-fail', batch: { size: 10, waitMs: 100 } })
  allFail(jobs: ActiveJob[]) {
    record('broken', jobs);
    throw new TypeError(`the sink is down (${jobs.length} jobs)`);
  }
}

@Processor('sized')
class SizedProcessor {
  @Process({ name: 'capped', batch: { size: 10, waitMs: 100 } })
  capped(jobs: ActiveJob<{ i: number }>[]) {
    record('sized', jobs);
    return jobs.map((j) => j.payload.i * 2);
  }

  @Process({ name: 'few', batch: { size: 50, waitMs: 50 } })
  few(jobs: ActiveJob[]) {
    record('sized-few', jobs);
  }
}

/** Opened by the test once the short timeout has failed its job: the call ends only then. */
let openSlow: () => void = () => undefined;
const slowGate = new Promise<void>((resolve) => (openSlow = resolve));

@Processor('slow')
class SlowProcessor {
  @Process({ name: 'slow', batch: { size: 3, waitMs: 60_000 } })
  async slow(jobs: ActiveJob<{ tag: string }>[]) {
    record('slow', jobs);
    await slowGate;
    return jobs.map((j) => j.payload.tag);
  }
}

/** Opened by the test once shutdown began: the running batch ends only then. */
let openGate: () => void = () => undefined;
const gate = new Promise<void>((resolve) => (openGate = resolve));
let gatedStarted = 0;

@Processor('stopping')
class StoppingProcessor {
  @Process({ name: 'gated', batch: { size: 5, waitMs: 60_000 } })
  async gated(jobs: ActiveJob[]) {
    record('stopping', jobs);
    gatedStarted++;
    await gate;
    return jobs.map((j) => `done ${j.id}`);
  }
}

@Processor('stopping')
class RestartedProcessor {
  @Process({ name: 'gated', batch: { size: 5, waitMs: 50 } })
  gated(jobs: ActiveJob[]) {
    record('stopping-again', jobs);
    return jobs.map((j) => `second node ${j.id}`);
  }
}

describe('batch handlers (@Process({ name, batch })) on a real database', () => {
  const t = useTestDatabase();
  const apps: INestApplicationContext[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  const boot = async (queue: object, providers: unknown[], shutdownTimeoutMs = 10_000) => {
    const app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100, shutdownTimeoutMs },
      queues: [queue as never],
      providers: providers as never,
    });
    apps.push(app);
    await app.init();
    return app;
  };

  const historyRows = async (queue: string) =>
    (
      await t.pool.query<{
        id: string;
        state: string;
        attempt: number;
        errors: { message: string; attempt: number }[];
        result: unknown;
      }>('SELECT id::text, state, attempt, errors, result FROM pgqueue.job_history WHERE queue = $1 ORDER BY id', [queue])
    ).rows;

  it('a batch of 100 where 3 fail retries those 3 only; each result and error is stored with its job', async () => {
    const app = await boot(
      {
        name: 'mixed',
        concurrency: 100,
        defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 0, jitter: false } },
      },
      [MixedProcessor],
    );
    const events = { completed: 0, retrying: 0 };
    runtimeOf(app).supervisor.on('completed', () => events.completed++);
    runtimeOf(app).supervisor.on('retrying', () => events.retrying++);
    const failing = new Set([7, 42, 99]);
    const added = await app.get(QueueService).addBulk(
      'mixed',
      Array.from({ length: 100 }, (_, i) => ({ name: 'send', payload: { i, failFirst: failing.has(i) } })),
    );
    await waitFor(async () => (await historyRows('mixed')).length === 100, {
      timeoutMs: 20_000,
      message: async () => `100 jobs finished; ${(await historyRows('mixed')).length} so far`,
    });
    // One addBulk commits the 100 at once: the first claim takes them all and one call gets them.
    expect(callsOf('mixed')[0]).toHaveLength(100);
    // The retried call holds only the three that failed (a retry of all 100 would be 100 here).
    const retriedIds = added.filter((_, i) => failing.has(i)).map((j) => j.id);
    expect(callsOf('mixed').slice(1).flat().sort()).toEqual([...retriedIds].sort());
    const rows = await historyRows('mixed');
    for (const [i, job] of added.entries()) {
      const row = rows.find((r) => r.id === job.id)!;
      expect(row.state).toBe('completed');
      if (failing.has(i)) {
        expect(row.attempt).toBe(2);
        expect(row.errors.map((e) => [e.attempt, e.message])).toEqual([[1, `bad ${i}`]]);
        expect(row.result).toEqual({ sent: i, attempt: 2 });
      } else {
        expect(row.attempt).toBe(1);
        expect(row.errors).toEqual([]);
        expect(row.result).toEqual({ sent: i, attempt: 1 });
      }
    }
    // Per-job events, as single handlers fire them (at least once: they fire after the writes).
    await waitFor(() => events.completed >= 100 && events.retrying >= 3, { timeoutMs: 20_000, message: 'the events' });
  });

  it('a thrown error fails every job of the batch, each with its own attempts', async () => {
    await boot(
      { name: 'broken', concurrency: 10, defaultJobOptions: { backoff: { type: 'fixed', delayMs: 0, jitter: false } } },
      [BrokenProcessor],
    );
    const q = apps.at(-1)!.get(QueueService);
    // Cross-process events, heard by a subscription as another process would: one per job.
    const events = q.queueEvents('broken');
    const heard: [string, string][] = [];
    events.on('failed', (job) => heard.push(['failed', job.id]));
    events.on('retrying', (job) => heard.push(['retrying', job.id]));
    await events.waitUntilReady({ timeoutMs: 20_000 });
    try {
      const once = await q.addBulk(
        'broken',
        [0, 1, 2].map(() => ({ name: 'all-fail', payload: {}, opts: { attempts: 1 } })),
      );
      const twice = await q.addBulk(
        'broken',
        [0, 1].map(() => ({ name: 'all-fail', payload: {}, opts: { attempts: 2 } })),
      );
      await waitFor(async () => (await historyRows('broken')).length === 5, { timeoutMs: 20_000, message: '5 jobs failed' });
      const rows = await historyRows('broken');
      for (const job of once) {
        const row = rows.find((r) => r.id === job.id)!;
        expect([row.state, row.attempt, row.errors.length]).toEqual(['failed', 1, 1]);
        expect(row.errors[0].message).toMatch(/^the sink is down/);
      }
      for (const job of twice) {
        const row = rows.find((r) => r.id === job.id)!;
        expect([row.state, row.attempt, row.errors.map((e) => e.attempt)]).toEqual(['failed', 2, [1, 2]]);
      }
      const expected = [...once, ...twice].map((j) => ['failed', j.id]).concat(twice.map((j) => ['retrying', j.id]));
      await waitFor(() => expected.every(([e, id]) => heard.some(([he, hid]) => he === e && hid === id)), {
        timeoutMs: 20_000,
        message: () => `an event per job; heard ${JSON.stringify(heard)}`,
      });
    } finally {
      await events.close();
    }
  });

  it('size caps each call; waitMs sends a partial batch', async () => {
    await boot({ name: 'sized', concurrency: 50 }, [SizedProcessor]);
    const q = apps.at(-1)!.get(QueueService);
    const capped = await q.addBulk(
      'sized',
      Array.from({ length: 35 }, (_, i) => ({ name: 'capped', payload: { i } })),
    );
    const few = await q.addBulk(
      'sized',
      [1, 2, 3].map(() => ({ name: 'few', payload: {} })),
    );
    await waitFor(async () => (await historyRows('sized')).length === 38, { timeoutMs: 20_000, message: '38 jobs completed' });
    expect(jobsCalled('sized')).toBe(35);
    expect(Math.max(...callsOf('sized').map((c) => c.length))).toBe(10);
    // 'few' waits 50 ms for 50 jobs that never come, then runs the 3 it has.
    expect(callsOf('sized-few').flat().sort()).toEqual(few.map((j) => j.id).sort());
    expect(Math.max(...callsOf('sized-few').map((c) => c.length))).toBeLessThan(50);
    const rows = await historyRows('sized');
    for (const job of capped) expect(rows.find((r) => r.id === job.id)!.result).toBe((job.payload as { i: number }).i * 2);
  });

  it('shutdown waits for the running batch and hands back a batch still collecting; a second node runs it', async () => {
    const app = await boot({ name: 'stopping', concurrency: 10 }, [StoppingProcessor]);
    const q = app.get(QueueService);
    const running = await q.addBulk(
      'stopping',
      [1, 2, 3, 4, 5].map(() => ({ name: 'gated', payload: {} })),
    );
    await waitFor(() => gatedStarted === 1, { timeoutMs: 20_000, message: 'the first batch to start' });
    // Two more: claimed and collected, waiting 60 s for a fuller batch that shutdown never lets start.
    const collected = await q.addBulk(
      'stopping',
      [1, 2].map(() => ({ name: 'gated', payload: {} })),
    );
    const active = async () =>
      (
        await t.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'stopping' AND state = 'active'",
        )
      ).rows[0].n;
    await waitFor(async () => (await active()) === 7, { timeoutMs: 20_000, message: 'all 7 jobs claimed' });
    const closing = app.close();
    apps.splice(apps.indexOf(app), 1);
    await waitFor(() => !runtimeOf(app).supervisor.running, { timeoutMs: 20_000, message: 'shutdown to begin' });
    // The collected two go back at once, uncounted, while the running batch still runs.
    const back = async () =>
      (
        await t.pool.query<{ id: string; attempt: number; locked_by: string | null }>(
          "SELECT id::text, attempt, locked_by FROM pgqueue.jobs WHERE queue = 'stopping' AND state = 'waiting' ORDER BY id",
        )
      ).rows;
    await waitFor(async () => (await back()).length === 2, { timeoutMs: 20_000, message: 'the collected jobs handed back' });
    expect(await back()).toEqual(collected.map((j) => ({ id: j.id, attempt: 0, locked_by: null })));
    openGate();
    await closing;
    expect(gatedStarted).toBe(1);
    const rows = await historyRows('stopping');
    for (const job of running)
      expect(rows.find((r) => r.id === job.id)).toMatchObject({ state: 'completed', result: `done ${job.id}` });
    // A second node (here: the app booted again) runs the handed-back ones: nothing was lost.
    await boot({ name: 'stopping', concurrency: 10 }, [RestartedProcessor]);
    await waitFor(async () => (await historyRows('stopping')).length === 7, { timeoutMs: 20_000, message: 'all 7 completed' });
    expect(callsOf('stopping-again').flat().sort()).toEqual(collected.map((j) => j.id).sort());
  });

  it("a job's timeoutMs runs from the call's start: that job fails, the call goes on for the others", async () => {
    const app = await boot({ name: 'slow', concurrency: 3, defaultJobOptions: { attempts: 1 } }, [SlowProcessor]);
    const q = app.get(QueueService);
    const [quick, a, b] = await q.addBulk('slow', [
      { name: 'slow', payload: { tag: 'quick' }, opts: { timeoutMs: 100 } },
      { name: 'slow', payload: { tag: 'a' } },
      { name: 'slow', payload: { tag: 'b' } },
    ]);
    await waitFor(async () => (await historyRows('slow')).length === 1, { timeoutMs: 20_000, message: 'the timed-out job' });
    const [timedOut] = await historyRows('slow');
    expect(timedOut).toMatchObject({ id: quick.id, state: 'failed' });
    expect(timedOut.errors[0].message).toMatch(/exceeded its timeout of 100 ms/);
    openSlow();
    await waitFor(async () => (await historyRows('slow')).length === 3, { timeoutMs: 20_000, message: 'the others' });
    const rows = await historyRows('slow');
    expect(rows.find((r) => r.id === a.id)).toMatchObject({ state: 'completed', result: 'a' });
    expect(rows.find((r) => r.id === b.id)).toMatchObject({ state: 'completed', result: 'b' });
    // What the call returned for the timed-out job ('quick') was ignored: it stays failed.
    expect(rows.find((r) => r.id === quick.id)!.state).toBe('failed');
    // One call for the three (the claim's order is not the ids' order).
    expect(callsOf('slow').map((c) => [...c].sort())).toEqual([[quick.id, a.id, b.id].sort()]);
  });

  it('refuses at boot a batch larger than the queue concurrency, saying what to change (not in a producer-only app)', async () => {
    const producer = await bootApp({
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'sized', concurrency: 20 }],
      providers: [SizedProcessor],
    });
    await producer.close();
    await expect(boot({ name: 'sized', concurrency: 20 }, [SizedProcessor])).rejects.toThrow(
      new PgQueueConfigError(
        'SizedProcessor.few (@Process({ name: "few", batch: { size: 50 } })): queue "sized" runs 20 job(s) at once in this ' +
          'process (concurrency), and each job of a batch holds one of those slots, so a batch could never hold 50. Raise the ' +
          "queue's concurrency to at least 50 (registerQueue({ concurrency }) or @Processor({ name, concurrency })), twice " +
          'that to collect the next batch while one runs, or lower batch.size.',
      ),
    );
  });
});

@Processor('toolkit')
class ToolkitProcessor {
  @Process({ name: 'sum', batch: { size: 20, waitMs: 60_000 } })
  sum(jobs: ActiveJob<{ n: number }>[]) {
    record('toolkit', jobs);
    const errors = new Map<string, Error>();
    for (const job of jobs) if (job.payload.n < 0 && job.attempt === 1) errors.set(job.id, new RangeError('negative'));
    if (errors.size) throw new BatchError(errors, { results: new Map(jobs.map((j) => [j.id, j.payload.n + 1])) });
    return jobs.map((j) => j.payload.n + 1);
  }
}

describe('nestjs-pg-queue/testing runs batch handlers', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext | undefined;
  afterAll(() => app?.close());

  it('drain() makes one call per round, without waiting waitMs, and records each job', async () => {
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: t.db.url }),
        PgQueueModule.registerQueue({
          name: 'toolkit',
          concurrency: 20,
          defaultJobOptions: { backoff: { type: 'fixed', delayMs: 3_600_000, jitter: false } },
        }),
      ],
      providers: [ToolkitProcessor],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
    moduleRef.useLogger(false);
    app = await moduleRef.init();
    const tester = app.get(PgQueueTester);
    const q = app.get(QueueService).getQueue('toolkit');
    const jobs = await q.addBulk([1, 2, -3, 4].map((n) => ({ name: 'sum', payload: { n } })));
    const first = await tester.drain();
    // One call (the 60 s wait is not waited), four outcomes: three completed, one retrying.
    expect(callsOf('toolkit').map((c) => [...c].sort())).toEqual([jobs.map((j) => j.id).sort()]);
    expect(first.map((o) => o.event).sort()).toEqual(['completed', 'completed', 'completed', 'retrying']);
    expect(tester.completed.map((o) => o.result).sort()).toEqual([2, 3, 5]);
    const again = await tester.drain({ makeDue: true });
    expect(again.map((o) => [o.event, o.job.id])).toEqual([['completed', jobs[2].id]]);
    expect((await q.getJob(jobs[2].id))!.result).toBe(-2);
  });
});
