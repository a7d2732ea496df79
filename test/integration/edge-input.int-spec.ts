import 'reflect-metadata';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Pool } from 'pg';
import {
  JobTimeoutError,
  PgQueueConfigError,
  PgQueuePayloadError,
  SnoozeJobError,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type Job,
} from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { assertBuilt } from '../support/built';
import { useTestDatabase, waitFor } from '../support/database';

// The worker survives bad input at the edges and reports it: rows written into the jobs table by
// hand, handlers that hang, throw things that are not Errors, or leave rejected promises behind.
// For each, the worker keeps running the next normal job, and the bad job ends where anyone can
// see it (completed, or failed with its error stored): never stuck active, never gone.
//
// A payload over maxPayloadBytes failing at enqueue, storing nothing, is covered in
// bad-input.int-spec.ts ('rejects a payload with too many bytes and stores nothing'), as are the
// other payloads JSON or jsonb refuse; a thrown string, an async rejection, a job name without a
// handler (enqueued with add) and a plain timeout are in retries.int-spec.ts.

const ROOT = path.resolve(__dirname, '..', '..');
const LEAKY_FIXTURE = path.join(ROOT, 'test', 'fixtures', 'leaky-handler-process.js');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pool completeWith() transactions run on (the test database's). */
let completePool: Pool | undefined;

/** What the 'hangs' handler saw on its signal, per attempt. */
const hangSignals: { attempt: number; aborted: boolean; reason: unknown }[] = [];

@Processor('edge')
class EdgeProcessor {
  @Process('ok')
  ok(job: Job) {
    return { payload: job.payload, errorsIsArray: Array.isArray(job.errors) };
  }

  @Process('throws')
  throws(job: Job) {
    throw new Error(`boom on attempt ${job.attempt}`);
  }

  /** Ignores its signal: only the timeout can end its attempt in time. */
  @Process('slow')
  async slow() {
    await sleep(300);
    return 'too late';
  }

  @Process('throws-value')
  throwsValue(job: Job<{ kind: string }>) {
    /* eslint-disable @typescript-eslint/only-throw-error */
    switch (job.payload.kind) {
      case 'object':
        throw { code: 42, reason: 'quota' };
      case 'undefined':
        throw undefined;
      case 'null':
        throw null;
      case 'number':
        throw 7;
      case 'unprintable': {
        // JSON.stringify throws on the BigInt, and String() on an object without a prototype.
        const o = Object.create(null) as Record<string, unknown>;
        o.n = 1n;
        throw o;
      }
      case 'lone-surrogate':
        // Cutting a string in the middle of an emoji leaves half a UTF-16 pair, which jsonb refuses.
        throw new Error('quota exceeded for 😀'.slice(0, -1));
      case 'nul':
        throw new Error('bad byte \u0000 in input');
      default:
        throw new Error(`unknown kind ${job.payload.kind}`);
    }
    /* eslint-enable @typescript-eslint/only-throw-error */
  }

  /** Returns what JSON cannot carry faithfully: it used to be stored as something else (or null) without a word. */
  @Process('returns')
  returns(job: Job<{ kind: string }>) {
    switch (job.payload.kind) {
      case 'lone-surrogate':
        return { text: 'half of 😀'.slice(0, -1) };
      case 'function':
        return () => 'done';
      case 'map':
        return { counts: new Map([['a', 1]]) };
      case 'nan':
        return { items: [{ total: 1 }, { total: NaN }] };
      case 'set':
        return [new Set([1])];
      case 'bigint':
        return { n: 1n };
      case 'undefined':
        return undefined;
      default:
        return { ok: true, at: new Date(Date.UTC(2026, 0, 1)) };
    }
  }

  /** completeWith() with a result JSON cannot carry: it throws before writing, so the caller's transaction rolls back. */
  @Process('completes-with-map')
  async completesWithMap(job: ActiveJob) {
    const client = await completePool!.connect();
    try {
      await client.query('BEGIN');
      await job.completeWith({ client }, { counts: new Map() });
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
  }
}

/** concurrency 1: a handler that never returns would block this queue for good if it held its slot. */
@Processor('serial')
class SerialProcessor {
  @Process('hangs')
  hangs(job: ActiveJob) {
    return new Promise(() => {
      job.signal.addEventListener('abort', () => {
        hangSignals.push({ attempt: job.attempt, aborted: job.signal.aborted, reason: job.signal.reason });
      });
    });
  }

  @Process('ok')
  ok() {
    return 'ok';
  }
}

@Processor('quiet')
class QuietProcessor {
  @Process()
  any() {}
}

/** Nest's logger, kept: what the library reported. */
class CapturingLogger implements LoggerService {
  readonly errors: string[] = [];
  readonly warnings: string[] = [];
  log() {}
  debug() {}
  verbose() {}
  error(message: unknown) {
    this.errors.push(String(message));
  }
  warn(message: unknown) {
    this.warnings.push(String(message));
  }
}

describe('the worker survives bad input at the edges and reports it', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;
  const logs = new CapturingLogger();

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: ctx.db.url, pollIntervalMs: 100, rescueIntervalMs: 200 },
      queues: [
        { name: 'edge', concurrency: 4, defaultJobOptions: { backoff: { type: 'fixed', delayMs: 50, jitter: false } } },
        { name: 'serial', concurrency: 1 },
        // Run by a child process (test/fixtures/leaky-handler-process.js); this app enqueues to it.
        { name: 'leaky' },
      ],
      providers: [EdgeProcessor, SerialProcessor],
    });
    app.useLogger(logs);
    await app.init();
    queues = app.get(QueueService);
    completePool = ctx.pool;
  });

  afterAll(async () => {
    await app?.close();
  });

  /** Waits until the job is completed or failed, and returns it. */
  async function ended(id: string, timeoutMs = 10_000): Promise<Job> {
    let job: Job | null = null;
    await waitFor(
      async () => {
        job = await queues.getJob(id);
        return job?.state === 'completed' || job?.state === 'failed';
      },
      { timeoutMs, message: async () => `job ${id} to complete or fail; now ${JSON.stringify(await queues.getJob(id))}` },
    );
    return job!;
  }

  /** A normal job still runs: the worker is alive and not blocked. */
  async function expectWorkerStillRuns(queue = 'edge'): Promise<void> {
    const next = await queues.add(queue, 'ok', { normal: true });
    expect(await ended(next.id)).toMatchObject({ state: 'completed' });
    expect(runtimeOf(app).supervisor.running).toBe(true);
  }

  /** INSERTs a row by hand, as an operator or another program might; unnamed columns take their defaults. */
  async function insertRow(row: Record<string, unknown>): Promise<string> {
    const cols: Record<string, unknown> = { queue: 'edge', payload: '{}', ...row };
    const keys = Object.keys(cols);
    const { rows } = await ctx.pool.query<{ id: string }>(
      `INSERT INTO pgqueue.jobs (${keys.join(', ')}) VALUES (${keys.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING id::text`,
      Object.values(cols),
    );
    return rows[0].id;
  }

  const failedWith = (names: string[]) => (job: Job) => {
    expect(job.state).toBe('failed');
    expect(job.errors.map((e) => e.name)).toEqual(names);
    for (const e of job.errors) expect(typeof e.message).toBe('string');
  };
  const completedWith = (payload: unknown) => (job: Job) => {
    expect(job).toMatchObject({ state: 'completed', result: { payload, errorsIsArray: true } });
  };
  const hourAgo = () => new Date(Date.now() - 3_600_000);
  /** Retried with the queue's default backoff, saying so. */
  const unusableBackoff = (job: Job) => {
    failedWith(['Error', 'Error'])(job);
    expect(logs.warnings).toContainEqual(
      expect.stringMatching(
        new RegExp(`^Job ${job.id} \\(edge/throws\\) has an unusable backoff .*; using the queue's default$`),
      ),
    );
  };

  describe('rows written into the jobs table by hand', () => {
    it.each<{ what: string; row: Record<string, unknown>; check: (job: Job) => void }>([
      // backoff: the library writes only validated objects (or NULL); anything else falls back to
      // the queue's default. A delay the retry statement cannot store used to fail that statement
      // on every flush, keeping the job active (its lease renewed) for ever.
      {
        what: 'a backoff that is a JSON string',
        row: { name: 'throws', max_attempts: 2, backoff: '"fast"' },
        check: unusableBackoff,
      },
      {
        what: 'a backoff that is an array',
        row: { name: 'throws', max_attempts: 2, backoff: '[1000, 2000]' },
        check: unusableBackoff,
      },
      {
        what: 'a valid backoff written by hand',
        row: { name: 'throws', max_attempts: 2, backoff: '{"type":"fixed","delayMs":400,"maxDelayMs":1000,"jitter":false}' },
        check: (job) => {
          failedWith(['Error', 'Error'])(job);
          // Its own 400 ms, not the queue's 50 ms.
          expect(Date.parse(job.errors[1].at) - Date.parse(job.errors[0].at)).toBeGreaterThanOrEqual(350);
          expect(logs.warnings.filter((w) => w.startsWith(`Job ${job.id} `) && /unusable backoff/.test(w))).toEqual([]);
        },
      },
      {
        what: 'a backoff that is JSON null',
        row: { name: 'throws', max_attempts: 2, backoff: 'null' },
        check: failedWith(['Error', 'Error']),
      },
      {
        what: 'a backoff of an unknown type',
        row: { name: 'throws', max_attempts: 2, backoff: '{"type":"linear","delayMs":10,"maxDelayMs":100}' },
        check: unusableBackoff,
      },
      {
        what: 'a backoff whose delay is not a number',
        row: { name: 'throws', max_attempts: 2, backoff: '{"type":"exponential","delayMs":"soon","maxDelayMs":60000}' },
        check: unusableBackoff,
      },
      {
        what: 'a backoff whose delay is beyond bigint',
        row: { name: 'throws', max_attempts: 2, backoff: '{"type":"fixed","delayMs":1e300,"maxDelayMs":1e300,"jitter":false}' },
        check: unusableBackoff,
      },
      {
        what: 'a backoff with negative delays',
        row: { name: 'throws', max_attempts: 2, backoff: '{"type":"fixed","delayMs":-5000,"maxDelayMs":-1,"jitter":false}' },
        check: unusableBackoff,
      },
      {
        what: 'a backoff with a fractional delay',
        row: { name: 'throws', max_attempts: 2, backoff: '{"type":"fixed","delayMs":10.5,"maxDelayMs":100,"jitter":false}' },
        check: unusableBackoff,
      },
      // payload: any JSON value reaches the handler as it is.
      { what: 'a payload that is JSON null', row: { name: 'ok', payload: 'null' }, check: completedWith(null) },
      {
        what: 'a payload that is a bare string',
        row: { name: 'ok', payload: '"just a string"' },
        check: completedWith('just a string'),
      },
      {
        what: 'a payload that is an array',
        row: { name: 'ok', payload: '[1, "two", null]' },
        check: completedWith([1, 'two', null]),
      },
      { what: 'a payload that is a number', row: { name: 'ok', payload: '-0.5e3' }, check: completedWith(-500) },
      { what: 'a payload that is a boolean', row: { name: 'ok', payload: 'false' }, check: completedWith(false) },
      // name
      {
        what: 'a name no handler has',
        row: { name: 'nobody-handles-this', max_attempts: 1 },
        check: failedWith(['UnknownJobNameError']),
      },
      { what: 'an empty name (add refuses it)', row: { name: '', max_attempts: 1 }, check: failedWith(['UnknownJobNameError']) },
      {
        what: 'a 10,000-character name (add refuses it): the error quotes it briefly',
        row: { name: 'n'.repeat(10_000), max_attempts: 1 },
        check: (job) => {
          failedWith(['UnknownJobNameError'])(job);
          expect(job.errors[0].message).toMatch(/^No handler for job "n{60}"… \(10000 characters\) in queue "edge"\./);
          expect(job.errors[0].message.length).toBeLessThan(600);
        },
      },
      // attempts
      { what: 'max_attempts 1 and a throwing handler', row: { name: 'throws', max_attempts: 1 }, check: failedWith(['Error']) },
      {
        what: 'an attempt already past max_attempts',
        row: { name: 'throws', attempt: 7, max_attempts: 3 },
        check: (job) => {
          failedWith(['Error'])(job);
          expect(job.attempt).toBe(8);
        },
      },
      {
        what: 'the largest attempt (the claim must not overflow it)',
        row: { name: 'throws', attempt: 2 ** 31 - 1, max_attempts: 3 },
        check: (job) => {
          failedWith(['Error'])(job);
          expect(job.attempt).toBe(2 ** 31 - 1);
        },
      },
      {
        what: 'a negative attempt',
        row: { name: 'throws', attempt: -2, max_attempts: 1 },
        check: failedWith(['Error', 'Error', 'Error']),
      },
      // timeout_ms: the handler ignores its signal; the attempt still ends at the timeout.
      {
        what: 'a timeout_ms of 1',
        row: { name: 'slow', timeout_ms: 1, max_attempts: 1 },
        check: failedWith(['JobTimeoutError']),
      },
      {
        what: 'a timeout_ms of 0',
        row: { name: 'slow', timeout_ms: 0, max_attempts: 1 },
        check: failedWith(['JobTimeoutError']),
      },
      {
        what: 'a negative timeout_ms',
        row: { name: 'slow', timeout_ms: -100, max_attempts: 1 },
        check: failedWith(['JobTimeoutError']),
      },
      { what: 'the largest timeout_ms', row: { name: 'ok', timeout_ms: 2 ** 31 - 1 }, check: completedWith({}) },
      // run_at, priority
      { what: 'a run_at in 1970', row: { name: 'ok', run_at: new Date(0) }, check: completedWith({}) },
      { what: 'a run_at of -infinity', row: { name: 'ok', run_at: '-infinity' }, check: completedWith({}) },
      { what: 'the lowest priority number', row: { name: 'ok', priority: -(2 ** 31) }, check: completedWith({}) },
      // errors: not a list. The handler still sees an array; a failure appends to what is there.
      { what: 'errors that are not a list', row: { name: 'ok', errors: '{"not":"a list"}' }, check: completedWith({}) },
      {
        what: 'errors that are not a list, and a throwing handler',
        row: { name: 'throws', errors: '"oops"', max_attempts: 1 },
        check: (job) => {
          expect(job.state).toBe('failed');
          expect(job.errors).toEqual(['oops', expect.objectContaining({ name: 'Error', message: 'boom on attempt 1' })]);
        },
      },
      // state 'active' that no live worker holds: the rescuer hands it back, recording why.
      {
        what: 'active, leased by a worker that is gone',
        row: { name: 'ok', state: 'active', attempt: 1, locked_by: 'gone-host:1:deadbeef', locked_until: hourAgo() },
        check: (job) => {
          expect(job).toMatchObject({ state: 'completed', attempt: 2 });
          expect(job.errors).toEqual([
            expect.objectContaining({
              attempt: 1,
              name: 'LeaseExpiredError',
              message: expect.stringContaining('gone-host:1:deadbeef'),
            }),
          ]);
        },
      },
      {
        what: 'active with no lease at all',
        row: { name: 'ok', state: 'active', attempt: 1 },
        check: (job) => {
          expect(job).toMatchObject({ state: 'completed', attempt: 2 });
          expect(job.errors).toEqual([
            expect.objectContaining({
              attempt: 1,
              name: 'LeaseExpiredError',
              message: expect.stringContaining('without a lease'),
            }),
          ]);
        },
      },
    ])('$what: the job ends visibly and the next one runs', async ({ row, check }) => {
      const id = await insertRow(row);
      check(await ended(id));
      await expectWorkerStillRuns();
    });

    it.each<{ what: string; row: Record<string, unknown>; code: string }>([
      { what: 'max_attempts 0', row: { name: 'ok', max_attempts: 0 }, code: '23514' },
      { what: 'a negative max_attempts', row: { name: 'ok', max_attempts: -1 }, code: '23514' },
      { what: "state 'completed' (finished jobs live in job_history)", row: { name: 'ok', state: 'completed' }, code: '23514' },
      { what: "state 'delayed' (a waiting job with a future run_at)", row: { name: 'ok', state: 'delayed' }, code: '23514' },
      { what: 'a SQL NULL payload', row: { name: 'ok', payload: null }, code: '23502' },
      { what: 'a NULL name', row: { name: null }, code: '23502' },
      { what: 'a NULL queue', row: { name: 'ok', queue: null }, code: '23502' },
      { what: 'NULL errors', row: { name: 'ok', errors: null }, code: '23502' },
      { what: 'a payload that is not JSON', row: { name: 'ok', payload: '{oops' }, code: '22P02' },
      { what: 'a backoff that is not JSON', row: { name: 'ok', backoff: 'fast' }, code: '22P02' },
      { what: 'a payload holding \\u0000', row: { name: 'ok', payload: '"a\\u0000b"' }, code: '22P05' },
      { what: 'a timeout_ms past int4', row: { name: 'ok', timeout_ms: 2 ** 31 }, code: '22003' },
    ])('the schema refuses a row with $what', async ({ row, code }) => {
      await expect(insertRow(row)).rejects.toMatchObject({ code });
    });

    it('nothing is left behind: no live row, no failed outcome write, no error event', async () => {
      expect((await ctx.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n).toBe(0);
      expect(logs.warnings.filter((w) => /job outcome\(s\) failed/.test(w))).toEqual([]);
      // Jobs that failed for good, or whose lease expired, are logged (logJobFailures: 'all'); nothing else.
      expect(
        logs.errors.filter((e) => !/^Job \d+ \([^)]*\) (failed on its last attempt|attempt \d+: lease expired)/.test(e)),
      ).toEqual([]);
    });
  });

  describe('handlers', () => {
    it('timeoutMs aborts a handler that never returns through job.signal; the queue keeps running jobs', async () => {
      const hung = await queues.add(
        'serial',
        'hangs',
        {},
        { attempts: 2, timeoutMs: 150, backoff: { type: 'fixed', delayMs: 10, jitter: false } },
      );
      // Behind it on a queue of concurrency 1: runs only if the timed-out attempt gave its slot back.
      const next = await queues.add('serial', 'ok', {});
      expect(await ended(next.id)).toMatchObject({ state: 'completed', result: 'ok' });
      const failed = await ended(hung.id);
      expect(failed).toMatchObject({ state: 'failed', attempt: 2 });
      expect(failed.errors.map((e) => [e.attempt, e.name, e.message])).toEqual([
        [1, 'JobTimeoutError', 'Job exceeded its timeout of 150 ms; its AbortSignal was fired.'],
        [2, 'JobTimeoutError', 'Job exceeded its timeout of 150 ms; its AbortSignal was fired.'],
      ]);
      expect(hangSignals.map((s) => [s.attempt, s.aborted])).toEqual([
        [1, true],
        [2, true],
      ]);
      for (const s of hangSignals) {
        expect(s.reason).toBeInstanceOf(JobTimeoutError);
        expect((s.reason as JobTimeoutError).timeoutMs).toBe(150);
      }
      await expectWorkerStillRuns('serial');
    });

    it.each([
      ['an object', 'object', 'Handler threw a non-Error value: {"code":42,"reason":"quota"}'],
      ['undefined', 'undefined', 'Handler threw a non-Error value: undefined'],
      ['null', 'null', 'Handler threw a non-Error value: null'],
      ['a number', 'number', 'Handler threw a non-Error value: 7'],
      ['an object neither JSON nor String() can print', 'unprintable', 'Handler threw a non-Error value: [object Object]'],
    ])('a handler that throws %s: the error is stored readable and the worker runs on', async (_what, kind, message) => {
      const job = await queues.add('edge', 'throws-value', { kind }, { attempts: 1 });
      const failed = await ended(job.id);
      expect(failed.state).toBe('failed');
      expect(failed.errors).toEqual([expect.objectContaining({ attempt: 1, name: 'NonError', message })]);
      await expectWorkerStillRuns();
    });

    it('an error message with half a surrogate pair is stored, the half replaced by U+FFFD', async () => {
      const job = await queues.add('edge', 'throws-value', { kind: 'lone-surrogate' }, { attempts: 1 });
      const failed = await ended(job.id);
      expect(failed.state).toBe('failed');
      expect(failed.errors).toEqual([expect.objectContaining({ name: 'Error', message: 'quota exceeded for \ufffd' })]);
      expect(failed.errors[0].stack).toContain('quota exceeded for \ufffd');
      await expectWorkerStillRuns();
    });

    it('an error message with a NUL is stored, the NUL replaced by U+FFFD, rather than losing the failure', async () => {
      const job = await queues.add('edge', 'throws-value', { kind: 'nul' }, { attempts: 1 });
      const failed = await ended(job.id);
      expect(failed.errors).toEqual([expect.objectContaining({ name: 'Error', message: 'bad byte \ufffd in input' })]);
      await expectWorkerStillRuns();
    });

    // The attempt fails with the reason recorded on the job, as if the handler had thrown it: a
    // result stored as null (or {}) would be lost with nobody told.
    it.each([
      ['half a surrogate pair', 'lone-surrogate', /result\.text contains a lone UTF-16 surrogate/],
      ['a function', 'function', /result is a function, which JSON leaves out/],
      ['a Map', 'map', /result\.counts is a Map, which JSON stores as \{\}/],
      ['NaN', 'nan', /result\.items\[1\]\.total is NaN/],
      ['a Set', 'set', /result\[0\] is a Set/],
      ['a BigInt', 'bigint', /result\.n is a BigInt/],
    ])('a result holding %s fails the attempt, saying where and why', async (_what, kind, problem) => {
      const job = await queues.add('edge', 'returns', { kind }, { attempts: 1 });
      const failed = await ended(job.id);
      expect(failed).toMatchObject({ state: 'failed', result: null });
      expect(failed.errors).toEqual([expect.objectContaining({ attempt: 1, name: 'PgQueuePayloadError' })]);
      expect(failed.errors[0].message).toMatch(
        new RegExp(`^Result of job ${job.id} \\("edge/returns"\\) cannot be stored as JSON: `),
      );
      expect(failed.errors[0].message).toMatch(problem);
      await expectWorkerStillRuns();
    });

    it('a result JSON carries (a Date as its ISO string, or nothing) completes as before', async () => {
      const dated = await queues.add('edge', 'returns', { kind: 'plain' });
      expect(await ended(dated.id)).toMatchObject({ state: 'completed', result: { ok: true, at: '2026-01-01T00:00:00.000Z' } });
      const nothing = await queues.add('edge', 'returns', { kind: 'undefined' });
      expect(await ended(nothing.id)).toMatchObject({ state: 'completed', result: null });
    });

    it('completeWith() with a result JSON cannot carry throws before writing: the transaction rolls back and the attempt fails', async () => {
      const job = await queues.add('edge', 'completes-with-map', {}, { attempts: 1 });
      const failed = await ended(job.id);
      expect(failed.state).toBe('failed');
      expect(failed.errors).toEqual([
        expect.objectContaining({ name: 'PgQueuePayloadError', message: expect.stringMatching(/result\.counts is a Map/) }),
      ]);
      await expectWorkerStillRuns();
    });

    it('a snooze longer than a timer can hold is refused where it is constructed', () => {
      expect(() => new SnoozeJobError(2 ** 31)).toThrow(PgQueueConfigError);
      expect(() => new SnoozeJobError(Infinity)).toThrow(/from 0 to 2\^31-1 \(about 24\.8 days\), got Infinity/);
    });

    it('a payload with half a surrogate pair fails at enqueue with a PgQueuePayloadError and stores nothing', async () => {
      const before = (await ctx.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n;
      const err = await queues.add('edge', 'ok', { text: 'half of 😀'.slice(0, -1) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PgQueuePayloadError);
      expect((err as Error).message).toMatch(/lone UTF-16 surrogate/);
      expect((await ctx.pool.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n).toBe(before);
      // A whole emoji, and the text "\ud83d" (a backslash, not a surrogate), are fine.
      const fine = await queues.add('edge', 'ok', { text: '😀 \\ud83d \\\\u0000' });
      expect(await ended(fine.id)).toMatchObject({ state: 'completed', result: { payload: { text: '😀 \\ud83d \\\\u0000' } } });
    });
  });

  describe('unhandled rejections started inside handlers', () => {
    it('the listener is installed while workers run and removed at close; handleUnhandledRejections: false installs none', async () => {
      const before = process.listenerCount('unhandledRejection');
      const on = await bootApp({ options: { connection: ctx.db.url }, queues: [{ name: 'quiet' }], providers: [QuietProcessor] });
      await on.init();
      expect(process.listenerCount('unhandledRejection')).toBe(before + 1);
      await on.close();
      expect(process.listenerCount('unhandledRejection')).toBe(before);

      const off = await bootApp({
        options: { connection: ctx.db.url, handleUnhandledRejections: false },
        queues: [{ name: 'quiet' }],
        providers: [QuietProcessor],
      });
      await off.init();
      expect(runtimeOf(off).supervisor.running).toBe(true);
      expect(process.listenerCount('unhandledRejection')).toBe(before);
      await off.close();
    });

    it('rejects a handleUnhandledRejections that is not a boolean', async () => {
      await expect(
        bootApp({ options: { connection: ctx.db.url, handleUnhandledRejections: 'yes' as unknown as boolean } }),
      ).rejects.toThrow(/Invalid handleUnhandledRejections: "yes"\. Use true or false/);
    });

    // Jest handles unhandled rejections in its own process, so the real test is a child process
    // running the built package as an app would.
    describe('in a worker process of its own', () => {
      type Exit = { code: number | null; signal: NodeJS.Signals | null };
      interface Child {
        readonly proc: ChildProcess;
        exit: Exit | null;
        readonly exited: Promise<Exit>;
        readonly output: () => string;
      }
      const children: Child[] = [];

      function startLeaky(handleUnhandledRejections: boolean): Child {
        const env: NodeJS.ProcessEnv = { ...process.env, DB_URL: ctx.db.url };
        if (handleUnhandledRejections) delete env.PGQ_HANDLE_UNHANDLED_REJECTIONS;
        else env.PGQ_HANDLE_UNHANDLED_REJECTIONS = 'false';
        const proc = spawn(process.execPath, [LEAKY_FIXTURE], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
        proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
        const child: Child = {
          proc,
          exit: null,
          exited: new Promise<Exit>((resolve) => proc.on('exit', (code, signal) => resolve((child.exit = { code, signal })))),
          output: () => out,
        };
        children.push(child);
        return child;
      }

      async function untilReady(c: Child): Promise<void> {
        await waitFor(
          () => {
            if (c.exit) throw new Error(`exited during boot: ${JSON.stringify(c.exit)}\n${c.output()}`);
            return /^ready$/m.test(c.output());
          },
          { timeoutMs: 20_000, intervalMs: 20, message: () => `the child to print "ready"; output so far:\n${c.output()}` },
        );
      }

      beforeAll(() => {
        assertBuilt();
      });

      afterEach(async () => {
        const alive = children.splice(0).filter((c) => !c.exit);
        for (const c of alive) c.proc.kill('SIGKILL');
        await Promise.all(alive.map((c) => c.exited));
      });

      it('by default it is logged as an error, and the process keeps running jobs', async () => {
        const child = startLeaky(true);
        await untilReady(child);
        const now = await queues.add('leaky', 'leak-now', {});
        const later = await queues.add('leaky', 'leak-later', {});
        expect(await ended(now.id)).toMatchObject({ state: 'completed', result: 'returned' });
        expect(await ended(later.id)).toMatchObject({ state: 'completed', result: 'returned' });
        await waitFor(() => child.output().includes(`leaked later by job ${later.id}`), {
          message: () => `the later rejection to be reported; output:\n${child.output()}`,
        });
        for (const id of [now.id, later.id]) {
          expect(child.output()).toMatch(
            new RegExp(`ERROR pg-queue: Unhandled promise rejection.*leaked (now|later) by job ${id}.*workers keep running`),
          );
        }
        // The stack of the rejected error, so the log points at the handler that left it.
        expect(child.output()).toMatch(/at LeakyProcessor\.leakNow/);

        const ok = await queues.add('leaky', 'ok', {});
        expect(await ended(ok.id)).toMatchObject({ state: 'completed', result: { pid: child.proc.pid } });
        expect(child.exit).toBeNull();

        child.proc.kill('SIGTERM');
        expect(await child.exited).toEqual({ code: 0, signal: null });
      }, 40_000);

      it('with handleUnhandledRejections: false, Node ends the process, as it would without the library', async () => {
        const child = startLeaky(false);
        await untilReady(child);
        const job = await queues.add('leaky', 'leak-now', {});
        let timer: NodeJS.Timeout | undefined;
        const exit = await Promise.race([
          child.exited,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`the child did not exit; output:\n${child.output()}`)), 15_000);
          }),
        ]).finally(() => clearTimeout(timer));
        expect(exit).toEqual({ code: 1, signal: null });
        expect(child.output()).toContain(`leaked now by job ${job.id}`);
        expect(child.output()).not.toMatch(/Unhandled promise rejection/);
      }, 40_000);
    });
  });
});
