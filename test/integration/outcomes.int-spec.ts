import 'reflect-metadata';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import type { Pool } from 'pg';
import { Registry } from 'prom-client';
import { Process, Processor, QueueService, SnoozeJobError, UnrecoverableError, type Job } from '../../lib';
import { PgQueueMetricsModule } from '../../lib/metrics';
import { JobStore } from '../../lib/db/job-store';
import { RunningJob } from '../../lib/worker/active-job';
import { Completer, type PendingOutcome } from '../../lib/worker/completer';
import { bootApp, runtimeOf } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// What happens after a handler returns: the outcome is written, then its event fires and a
// failure is logged; an outcome that matched no row is reported; one the database refuses is
// isolated and fails its own job, never the batch.

/** Nest's logger, kept: every line the library wrote, at any level. */
class CapturingLogger implements LoggerService {
  readonly lines: { level: string; message: string; extra: unknown[] }[] = [];
  log(message: unknown, ...extra: unknown[]) {
    this.lines.push({ level: 'log', message: String(message), extra });
  }
  error(message: unknown, ...extra: unknown[]) {
    this.lines.push({ level: 'error', message: String(message), extra });
  }
  warn(message: unknown, ...extra: unknown[]) {
    this.lines.push({ level: 'warn', message: String(message), extra });
  }
  debug(message: unknown, ...extra: unknown[]) {
    this.lines.push({ level: 'debug', message: String(message), extra });
  }
  verbose(message: unknown, ...extra: unknown[]) {
    this.lines.push({ level: 'verbose', message: String(message), extra });
  }
  about(id: string) {
    return this.lines.filter((l) => l.message.includes(`Job ${id} `) || l.message.includes(`job ${id} `));
  }
}

/** A JobStore of its own on `pool`, for the tests that drive the outcome writer directly. */
function directStore(pool: Pool): JobStore {
  return new JobStore(pool, {
    schema: 'pgqueue',
    retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
    asyncCommit: true,
    preparedStatements: false,
  });
}

/** Release functions of 'held' jobs, by id: the test decides when each handler returns. */
const held = new Map<string, () => void>();

@Processor('work')
class WorkProcessor {
  @Process('ok')
  ok(job: Job) {
    return { done: job.id };
  }

  @Process('fails')
  fails(job: Job) {
    throw new Error(`refused by the mail server on attempt ${job.attempt}`);
  }

  @Process('unrecoverable')
  unrecoverable() {
    throw new UnrecoverableError('card declined');
  }

  @Process('fails-once')
  failsOnce(job: Job) {
    if (job.attempt === 1) throw new Error('first attempt fails');
    return 'second attempt ok';
  }

  /** Snoozes for a delay no timestamp can hold, as a subclass or later code could make it. */
  @Process('snooze-forever')
  snoozeForever() {
    const err = new SnoozeJobError(1000);
    (err as { delayMs: number }).delayMs = 1e300;
    throw err;
  }

  @Process('held')
  held(job: Job) {
    return new Promise<string>((resolve) => held.set(job.id, () => resolve('finished late')));
  }
}

describe('outcomes: written first, then events and logs; lost and refused ones reported', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;
  const logs = new CapturingLogger();
  const registry = new Registry();

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 200, rescueIntervalMs: 60_000 },
      queues: [
        { name: 'work', concurrency: 10, defaultJobOptions: { backoff: { type: 'fixed', delayMs: 500 } } },
        { name: 'direct' },
      ],
      providers: [WorkProcessor],
      imports: [PgQueueMetricsModule.register({ registry })],
    });
    app.useLogger(logs);
    await app.init();
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    for (const release of held.values()) release();
    await app?.close();
  });

  async function ended(id: string, states = ['completed', 'failed'], timeoutMs = 10_000): Promise<Job> {
    let job: Job | null = null;
    await waitFor(
      async () => {
        job = await queues.getJob(id);
        return states.includes(job?.state ?? '');
      },
      {
        timeoutMs,
        message: async () => `job ${id} to reach ${states.join(' or ')}; now ${JSON.stringify(await queues.getJob(id))}`,
      },
    );
    return job!;
  }

  describe('logging job failures (logJobFailures: all, the default)', () => {
    it('warns for each failed attempt and logs an error when the job fails for good', async () => {
      const job = await queues.add('work', 'fails', {}, { attempts: 2, backoff: { type: 'fixed', delayMs: 10 } });
      await ended(job.id, ['failed']);
      await waitFor(() => logs.about(job.id).length >= 2, {
        message: () => `two lines about job ${job.id}: ${JSON.stringify(logs.about(job.id))}`,
      });
      const lines = logs.about(job.id);
      expect(lines.map((l) => [l.level, l.message])).toEqual([
        ['warn', `Job ${job.id} (work/fails) attempt 1/2 failed: refused by the mail server on attempt 1; retrying in 10 ms`],
        ['error', `Job ${job.id} (work/fails) failed on its last attempt (2/2): refused by the mail server on attempt 2`],
      ]);
      // The error line carries the handler's stack.
      expect(String(lines[1].extra[0])).toContain('refused by the mail server on attempt 2');
    });

    it('UnrecoverableError: one error line that says the job failed for good before its last attempt, counted as failed', async () => {
      const job = await queues.add('work', 'unrecoverable', {}, { attempts: 5 });
      await ended(job.id, ['failed']);
      await waitFor(() => logs.about(job.id).length >= 1, { message: () => `a line about job ${job.id}` });
      expect(logs.about(job.id).map((l) => [l.level, l.message])).toEqual([
        [
          'error',
          `Job ${job.id} (work/unrecoverable) failed for good on attempt 1/5 (UnrecoverableError: not retried): card declined`,
        ],
      ]);
      const failed = await registry.getSingleMetric('pgqueue_jobs_failed_total')?.get();
      expect(failed?.values.find((v) => v.labels.name === 'unrecoverable')?.value).toBe(1);
    });

    it('a job that completes logs nothing, at any level', async () => {
      const job = await queues.add('work', 'ok', {});
      await ended(job.id, ['completed']);
      // The completion is written before its event: once the event fired, a line would have been logged.
      // The listener is on before the add: the job can complete before add() resolves (a busy
      // pool coalesces adds, and the caller resumes after the commit; seen once in CI).
      const sup = runtimeOf(app).supervisor;
      const completed = new Set<string>();
      const record = (j: Job) => completed.add(j.id);
      sup.on('completed', record);
      let done: Job;
      try {
        done = await queues.add('work', 'ok', {});
        await waitFor(() => completed.has(done.id), { message: () => `the completed event of job ${done.id}` });
      } finally {
        sup.off('completed', record);
      }
      expect(logs.about(job.id)).toEqual([]);
      expect(logs.about(done.id)).toEqual([]);
    });
  });

  describe('a fixed backoff', () => {
    it('schedules the retry exactly delayMs after the outcome is written, by the database clock', async () => {
      // Records, in the retry's own transaction, its now() and the run_at it set.
      await ctx.pool.query(`
        CREATE TABLE public.retry_writes (id bigint, written_at timestamptz, run_at timestamptz);
        CREATE FUNCTION public.record_retry() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF OLD.state = 'active' AND NEW.state = 'waiting' THEN
            INSERT INTO public.retry_writes VALUES (NEW.id, now(), NEW.run_at);
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER record_retry AFTER UPDATE ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION public.record_retry();`);
      try {
        // The queue's backoff is { type: 'fixed', delayMs: 500 }: no jitter given, so none.
        const jobs = await queues.addBulk('work', [
          { name: 'fails-once', payload: {} },
          { name: 'fails-once', payload: {} },
          { name: 'fails-once', payload: {} },
        ]);
        for (const j of jobs) expect(await ended(j.id, ['completed'])).toMatchObject({ state: 'completed', attempt: 2 });
        const { rows } = await ctx.pool.query<{ id: string; gap_ms: number }>(
          `SELECT id::text, (extract(epoch FROM run_at - written_at) * 1000)::float8 AS gap_ms FROM public.retry_writes
           WHERE id = ANY($1::bigint[]) ORDER BY id`,
          [jobs.map((j) => j.id)],
        );
        expect(rows).toEqual(jobs.map((j) => ({ id: j.id, gap_ms: 500 })));
      } finally {
        await ctx.pool.query('DROP TRIGGER record_retry ON pgqueue.jobs');
      }
    });
  });

  describe('events fire after the outcome is written', () => {
    it("a 'completed' listener reads the job as completed, a 'retrying' one as waiting, a 'failed' one as failed", async () => {
      const sup = runtimeOf(app).supervisor;
      const seen = new Map<string, Promise<string | undefined>>();
      const read = (event: string) => (job: Job) => {
        seen.set(
          `${event}:${job.id}`,
          queues.getJob(job.id).then((j) => (j?.state === 'delayed' ? 'waiting' : j?.state)),
        );
      };
      const onCompleted = read('completed');
      const onRetrying = read('retrying');
      const onFailed = read('failed');
      sup.on('completed', onCompleted);
      sup.on('retrying', onRetrying);
      sup.on('failed', onFailed);
      try {
        const ok = await queues.addBulk(
          'work',
          Array.from({ length: 20 }, () => ({ name: 'ok', payload: {} })),
        );
        const bad = await queues.add('work', 'fails', {}, { attempts: 2, backoff: { type: 'fixed', delayMs: 200 } });
        for (const j of ok) await ended(j.id, ['completed']);
        await ended(bad.id, ['failed']);
        await waitFor(() => seen.has(`failed:${bad.id}`));
        for (const j of ok) expect(await seen.get(`completed:${j.id}`)).toBe('completed');
        expect(await seen.get(`retrying:${bad.id}`)).toBe('waiting');
        expect(await seen.get(`failed:${bad.id}`)).toBe('failed');
      } finally {
        sup.off('completed', onCompleted);
        sup.off('retrying', onRetrying);
        sup.off('failed', onFailed);
      }
    });

    it('an outcome whose lease was lost is counted, logged and reported, and changes nothing', async () => {
      const sup = runtimeOf(app).supervisor;
      const dropped: [string, string][] = [];
      const completed: string[] = [];
      const onDropped = (job: Job, outcome: string) => dropped.push([job.id, outcome]);
      const onCompleted = (job: Job) => completed.push(job.id);
      sup.on('outcomeDropped', onDropped);
      sup.on('completed', onCompleted);
      try {
        const job = await queues.add('work', 'held', {});
        await waitFor(() => held.has(job.id), { message: `job ${job.id} to start` });
        // Another worker took the job over (as after this one stalled past its lease).
        await ctx.pool.query(`UPDATE pgqueue.jobs SET locked_by = 'another-worker', attempt = attempt + 1 WHERE id = $1`, [
          job.id,
        ]);
        held.get(job.id)!();
        await waitFor(() => dropped.length > 0, { message: 'the dropped outcome to be reported' });
        expect(dropped).toEqual([[job.id, 'completed']]);
        expect(completed).not.toContain(job.id);
        expect(logs.about(job.id)).toEqual([
          {
            level: 'warn',
            message:
              `Outcome of job ${job.id} (work/held) attempt 1 (completed) not written: the job is no longer this worker's ` +
              '(its lease expired, so the rescuer or another worker has it); dropped',
            extra: expect.anything(),
          },
        ]);
        const counter = await registry.getSingleMetric('pgqueue_outcomes_dropped_total')?.get();
        expect(counter?.values).toEqual([{ labels: { queue: 'work', name: 'held' }, value: 1 }]);
        // The other worker's attempt is untouched.
        expect(await queues.getJob(job.id)).toMatchObject({ state: 'active', attempt: 2 });
        await ctx.pool.query('DELETE FROM pgqueue.jobs WHERE id = $1', [job.id]);
      } finally {
        sup.off('outcomeDropped', onDropped);
        sup.off('completed', onCompleted);
      }
    });
  });

  describe('a bad outcome never wedges the writer', () => {
    it('the writer isolates an outcome the database refuses, fails that job, and writes the rest of the batch', async () => {
      // Straight to the outcome writer, whatever the worker validated: queue 'direct' has no worker here.
      const pool = testPool(ctx.db.url, 2);
      try {
        const store = directStore(pool);
        const added = await queues.addBulk(
          'direct',
          Array.from({ length: 5 }, (_, i) => ({ name: `j${i}`, payload: {} })),
        );
        const rows = await store.claim('direct', 10, 'test-worker', 60_000);
        expect(rows).toHaveLength(5);
        const byName = new Map(rows.map((r) => [r.name, new RunningJob(r, 'direct')]));
        const claimedAt = new Map(rows.map((r) => [r.name, r.started_at_ms]));
        const job = (name: string) => byName.get(name)!;
        const outcome = (name: string) => ({ id: job(name).id, attempt: job(name).attempt, job: job(name) });
        const failure = (name: string) => ({ ...outcome(name), claimedAtMs: claimedAt.get(name)! });
        const written: string[] = [];
        const refused: { id: string; failedInstead: string | null; error: string }[] = [];
        const completer = new Completer(
          store,
          'test-worker',
          { log() {}, warn() {}, error() {} },
          {
            written: (o) => written.push(`${o.kind}:${o.job.name}`),
            dropped: (o) => written.push(`dropped:${o.job.name}`),
            refused: (o, err, instead) => refused.push({ id: o.id, failedInstead: instead?.kind ?? null, error: err.message }),
          },
        );
        const batch: PendingOutcome[] = [
          { kind: 'completed', ...outcome('j0'), resultJson: '{"ok":true}', result: { ok: true } },
          { kind: 'snoozed', ...failure('j1'), delayMs: 60_000 },
          // A bigint, but past any interval: the whole snooze statement fails with it.
          { kind: 'snoozed', ...failure('j2'), delayMs: 2 ** 62 },
          { kind: 'snoozed', ...failure('j3'), delayMs: 60_000 },
          { kind: 'completed', ...outcome('j4'), resultJson: null, result: undefined },
        ];
        for (const o of batch) completer.push(o);
        await waitFor(() => written.length === 4 && refused.length === 1, {
          message: () => `every outcome reported; written ${JSON.stringify(written)}, refused ${JSON.stringify(refused)}`,
        });
        expect(written.sort()).toEqual(['completed:j0', 'completed:j4', 'snoozed:j1', 'snoozed:j3']);
        expect(refused).toEqual([{ id: job('j2').id, failedInstead: 'failed', error: expect.stringMatching(/out of range/) }]);
        const state = async (name: string) => (await queues.getJob(added[Number(name.slice(1))].id))?.state;
        expect(await Promise.all(['j0', 'j1', 'j2', 'j3', 'j4'].map(state))).toEqual([
          'completed',
          'delayed',
          'failed',
          'delayed',
          'completed',
        ]);
        const failed = await queues.getJob(job('j2').id);
        expect(failed?.errors).toEqual([
          expect.objectContaining({
            name: 'OutcomeRefusedError',
            message: expect.stringMatching(
              /^The database refused this attempt's snoozed outcome \(.*out of range.*\); the job was failed instead\.$/,
            ),
          }),
        ]);
        expect(await completer.drain(Date.now() + 1000)).toBe(0);
      } finally {
        await pool.end();
      }
    });

    it('a second outcome write goes out beside a stuck one once 64 outcomes wait, and never before', async () => {
      const pool = testPool(ctx.db.url, 3);
      const blocker = testPool(ctx.db.url, 1);
      const lock = await blocker.connect();
      let completer: Completer | undefined;
      try {
        const store = directStore(pool);
        await queues.addBulk('direct', [
          { name: 'stuck', payload: {} },
          ...Array.from({ length: 10 }, (_, i) => ({ name: `few${i}`, payload: {} })),
          ...Array.from({ length: 100 }, (_, i) => ({ name: `many${i}`, payload: {} })),
        ]);
        const rows = await store.claim('direct', 200, 'test-worker', 60_000);
        expect(rows).toHaveLength(111);
        const done = (r: (typeof rows)[number]): PendingOutcome => {
          const job = new RunningJob(r, 'direct');
          return { kind: 'completed', id: job.id, attempt: job.attempt, job, resultJson: null, result: undefined };
        };
        const byName = (prefix: string) => rows.filter((r) => r.name.startsWith(prefix)).map(done);
        const written: string[] = [];
        completer = new Completer(
          store,
          'test-worker',
          { log() {}, warn() {}, error() {} },
          { written: (o) => written.push(o.job.name), dropped: (o) => written.push(`dropped:${o.job.name}`), refused() {} },
        );
        // The first write blocks on a row lock held elsewhere (a slow statement, a busy server).
        const [stuck] = byName('stuck');
        await lock.query('BEGIN');
        await lock.query('SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE', [stuck.id]);
        completer.push(stuck);
        const waiting = async () =>
          (
            await ctx.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%DELETE FROM%'`,
            )
          ).rows[0].n === 1;
        await waitFor(waiting, { message: () => 'the first outcome write never waited on the row lock' });
        // Ten behind it are left for the next write: no statement per handful of outcomes.
        const few = byName('few');
        for (const o of few) completer.push(o);
        // A write would take them out of the pending list on the completer's next turn (push
        // schedules it with setImmediate): after that turn, all ten are still waiting, none written.
        await new Promise((r) => setImmediate(r));
        expect(completer.pendingIds()).toEqual(few.map((o) => o.id));
        expect(written).toEqual([]);
        // 110 waiting: a second write goes out beside the stuck one and commits on its own.
        for (const o of byName('many')) completer.push(o);
        await waitFor(() => written.length === 110, { message: () => `written so far: ${written.length}` });
        expect(written).not.toContain('stuck');
        expect(await waiting()).toBe(true);
        await lock.query('COMMIT');
        await waitFor(() => written.length === 111, { message: () => `written so far: ${written.length}` });
        expect(new Set(written).size).toBe(111);
        expect(await completer.drain(Date.now() + 5000)).toBe(0);
        const { rows: history } = await ctx.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'direct' AND state = 'completed' AND id = ANY($1::bigint[])`,
          [rows.map((r) => String(r.id))],
        );
        expect(history[0].n).toBe(111);
      } finally {
        await lock.query('ROLLBACK').catch(() => undefined);
        // A failed assertion leaves writes behind: end them before the pool, or their retries outlive the test.
        await completer?.drain(Date.now() + 5000);
        lock.release();
        await blocker.end();
        await pool.end();
      }
    });

    it('a snooze no timestamp can hold fails its job, saying why; the jobs around it complete', async () => {
      const jobs = await queues.addBulk('work', [
        { name: 'ok', payload: {} },
        { name: 'snooze-forever', payload: {}, opts: { attempts: 1 } },
        { name: 'ok', payload: {} },
        { name: 'ok', payload: {} },
      ]);
      const bad = jobs[1];
      for (const j of jobs) if (j !== bad) await ended(j.id, ['completed']);
      const failed = await ended(bad.id, ['failed']);
      expect(failed.errors).toHaveLength(1);
      expect(failed.errors[0]).toMatchObject({
        name: 'PgQueueConfigError',
        message: expect.stringContaining('SnoozeJobError delayMs'),
      });
      // And completions after it are not held back.
      const later = await queues.add('work', 'ok', {});
      await ended(later.id, ['completed']);
      expect(logs.lines.filter((l) => /job outcome\(s\) failed/.test(l.message))).toEqual([]);
    });
  });
});
