import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import { Process, Processor, QueueService, type ActiveJob, type Job } from '../../lib';
import { bootApp } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

/** Per job, each attempt's due time and claim time, as the database stamped them. */
const attemptsSeen = new Map<string, { runAt: number; startedAt: number }[]>();
const aborted = new Map<string, unknown>();

function seen(job: Job): void {
  attemptsSeen.set(job.id, [
    ...(attemptsSeen.get(job.id) ?? []),
    { runAt: job.runAt.getTime(), startedAt: job.startedAt!.getTime() },
  ]);
}

@Processor('flaky')
class FlakyProcessor {
  @Process('always-fails')
  alwaysFails(job: Job<{ n: number }>) {
    seen(job);
    throw new Error(`boom on attempt ${job.attempt}`);
  }

  @Process('fails-once')
  failsOnce(job: Job) {
    seen(job);
    if (job.attempt === 1) throw new TypeError('transient');
    return { ok: true, attempt: job.attempt };
  }

  @Process('throws-string')
  throwsString(job: Job) {
    seen(job);
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    throw 'not an Error';
  }

  @Process('hangs')
  hangs(job: ActiveJob) {
    seen(job);
    return new Promise((resolve) => {
      job.signal.addEventListener('abort', () => aborted.set(job.id, job.signal.reason));
      void resolve; // never resolves on its own
    });
  }

  @Process('rejects-later')
  async rejectsLater(job: Job) {
    seen(job);
    await new Promise((r) => setTimeout(r, 10));
    return Promise.reject(new RangeError('async failure'));
  }
}

describe('handler outcomes: retries with backoff, failed state, error history', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let queues: QueueService;

  const finished = (id: string) => async () => {
    const j = await queues.getJob(id);
    return j?.state === 'completed' || j?.state === 'failed';
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await bootApp({
      options: { connection: db.url, pollIntervalMs: 100 },
      queues: [{ name: 'flaky', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 300, jitter: false } } }],
      providers: [FlakyProcessor],
    });
    await app.init();
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('retries a throwing handler with the configured backoff, then fails it keeping every error', async () => {
    const job = await queues.add('flaky', 'always-fails', { n: 1 }, { attempts: 3 });
    expect(job.maxAttempts).toBe(3);
    await waitFor(finished(job.id), { timeoutMs: 10_000, message: 'job to fail' });
    const failed = (await queues.getJob(job.id))!;
    expect(failed.state).toBe('failed');
    expect(failed.attempt).toBe(3);
    expect(failed.errors.map((e) => [e.attempt, e.name, e.message])).toEqual([
      [1, 'Error', 'boom on attempt 1'],
      [2, 'Error', 'boom on attempt 2'],
      [3, 'Error', 'boom on attempt 3'],
    ]);
    expect(failed.errors[0].stack).toContain('alwaysFails');
    expect(failed.finishedAt).toBeInstanceOf(Date);
    const attempts = attemptsSeen.get(job.id)!;
    expect(attempts).toHaveLength(3);
    // Fixed 300 ms backoff, no jitter, by the database's clock: each retry was due 300 ms or more
    // after the failed attempt started (300 ms after its failure was written), and was not
    // claimed before it was due.
    for (let i = 1; i < attempts.length; i++) {
      expect(attempts[i].runAt - attempts[i - 1].startedAt).toBeGreaterThanOrEqual(300);
      expect(attempts[i].startedAt).toBeGreaterThanOrEqual(attempts[i].runAt);
    }
  });

  it('a job that fails once and then succeeds completes with its result and the first error kept', async () => {
    const job = await queues.add('flaky', 'fails-once', {});
    await waitFor(finished(job.id), { timeoutMs: 10_000 });
    const done = (await queues.getJob(job.id))!;
    expect(done).toMatchObject({ state: 'completed', attempt: 2, result: { ok: true, attempt: 2 } });
    expect(done.errors).toHaveLength(1);
    expect(done.errors[0]).toMatchObject({ attempt: 1, name: 'TypeError', message: 'transient' });
  });

  it('records a thrown non-Error and an async rejection', async () => {
    const a = await queues.add('flaky', 'throws-string', {}, { attempts: 1 });
    const b = await queues.add('flaky', 'rejects-later', {}, { attempts: 1 });
    await waitFor(finished(a.id), { timeoutMs: 10_000 });
    await waitFor(finished(b.id), { timeoutMs: 10_000 });
    expect((await queues.getJob(a.id))!.errors[0]).toMatchObject({
      name: 'NonError',
      message: expect.stringContaining('not an Error'),
    });
    expect((await queues.getJob(b.id))!.errors[0]).toMatchObject({ name: 'RangeError', message: 'async failure' });
  });

  it('a job whose name has no handler fails visibly, naming the fix', async () => {
    const job = await queues.add('flaky', 'no-such-job', {}, { attempts: 2, backoff: { type: 'fixed', delayMs: 10 } });
    await waitFor(finished(job.id), { timeoutMs: 10_000 });
    const failed = (await queues.getJob(job.id))!;
    expect(failed.state).toBe('failed');
    expect(failed.errors).toHaveLength(2);
    expect(failed.errors[1]).toMatchObject({
      name: 'UnknownJobNameError',
      message: expect.stringContaining(`No handler for job "no-such-job" in queue "flaky"`),
    });
    expect(failed.errors[1].message).toContain("@Process('no-such-job')");
  });

  it('timeoutMs aborts a handler that never returns and fails the attempt', async () => {
    const job = await queues.add('flaky', 'hangs', {}, { attempts: 1, timeoutMs: 200 });
    await waitFor(finished(job.id), { timeoutMs: 10_000 });
    const failed = (await queues.getJob(job.id))!;
    expect(failed.state).toBe('failed');
    expect(failed.errors[0]).toMatchObject({ name: 'JobTimeoutError' });
    expect(aborted.get(job.id)).toBeInstanceOf(Error);
  });

  it('finished jobs leave the live table the claim scans', async () => {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      await waitFor(async () => (await c.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n === 0, {
        message: 'live table to empty',
      });
      const { rows } = await c.query(`SELECT state, count(*)::int AS n FROM pgqueue.job_history GROUP BY state ORDER BY state`);
      expect(rows).toEqual([
        { state: 'completed', n: 1 },
        { state: 'failed', n: 5 },
      ]);
    } finally {
      await c.end();
    }
  });

  it("each attempt's error carries its start and end on the database's clock (retry and final fail)", async () => {
    const job = await queues.add('flaky', 'always-fails', { n: 2 }, { attempts: 2 });
    await waitFor(finished(job.id), { timeoutMs: 10_000, message: 'job to fail' });
    const failed = (await queues.getJob(job.id))!;
    expect(failed.state).toBe('failed');
    const errors = failed.errors as (Job['errors'][number] & { startedAt?: string; endedAt?: string })[];
    const attempts = attemptsSeen.get(job.id)!;
    expect(errors).toHaveLength(2);
    expect(attempts).toHaveLength(2);
    errors.forEach((e, i) => {
      expect(typeof e.startedAt).toBe('string');
      expect(typeof e.endedAt).toBe('string');
      // The start the claim stamped (what the handler saw as job.startedAt), to the millisecond.
      expect(Math.abs(Date.parse(e.startedAt!) - attempts[i].startedAt)).toBeLessThan(1);
      expect(Date.parse(e.endedAt!)).toBeGreaterThanOrEqual(Date.parse(e.startedAt!));
    });
    // The retry's end is the now() its run_at was reckoned from: due 300 ms (fixed backoff) later.
    expect(Math.abs(Date.parse(errors[0].endedAt!) + 300 - attempts[1].runAt)).toBeLessThan(1);
    // The final fail's end is the job's finished_at, written by the same statement.
    expect(Math.abs(Date.parse(errors[1].endedAt!) - failed.finishedAt!.getTime())).toBeLessThan(1);
  });
});
