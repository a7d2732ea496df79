import { RunningJob } from '../../lib/worker/active-job';
import {
  ALREADY_WRITTEN,
  HAND_BACK,
  MAX_DELAY_MS,
  decideOutcome,
  storedResultJson,
  usableBackoff,
  type AttemptEnd,
  type AttemptFacts,
  type Decision,
  type OutcomeClock,
} from '../../lib/worker/outcome';
import {
  CancelJobError,
  JobTimeoutError,
  LeaseLostError,
  PgQueuePayloadError,
  ShutdownError,
  SnoozeJobError,
  UnrecoverableError,
} from '../../lib/core/errors';
import type { ResolvedBackoff } from '../../lib/core/options/resolved';
import { claimedRow } from '../support/job-row';

// The worker's one decision (lib/worker/outcome.ts): what an attempt's end means. Pure, so every
// branch is checked here without a database; the integration suite checks the writes it leads to.

const AT = new Date('2030-01-02T03:04:05.000Z');
/** random() at 0.5: a jittered delay lands in the middle of [d/2, d]. */
const clock: OutcomeClock = { now: () => AT, random: () => 0.5 };
const FIXED: ResolvedBackoff = { type: 'fixed', delayMs: 1000, maxDelayMs: 60_000, jitter: false };
const EXP: ResolvedBackoff = { type: 'exponential', delayMs: 100, maxDelayMs: 60_000, jitter: false };

interface Case {
  attempt?: number;
  maxAttempts?: number;
  backoff?: ResolvedBackoff;
  cancelRequested?: boolean;
  completedInTransaction?: boolean;
  deadLetterQueue?: string | null;
  claimedAtMs?: number | null;
}

function facts(c: Case = {}): AttemptFacts {
  const row = claimedRow({ attempt: c.attempt ?? 1, max_attempts: c.maxAttempts ?? 3 });
  return {
    job: new RunningJob(row, 'mail'),
    backoff: c.backoff ?? FIXED,
    cancelRequested: c.cancelRequested ?? false,
    completedInTransaction: c.completedInTransaction ?? false,
    claimedAtMs: c.claimedAtMs ?? null,
  };
}

function decide(end: AttemptEnd, value: unknown, c: Case = {}): Decision {
  return decideOutcome(facts(c), end, value, { deadLetterQueue: c.deadLetterQueue ?? null }, clock);
}

/** The decision without the references it carries (job, thrown), for table comparisons. */
function shape(d: Decision): Record<string, unknown> {
  // The claim time is the attempt's, passed through whatever the end: checked on its own below.
  const { job: _job, thrown: _thrown, errorJson: _json, claimedAtMs: _claimed, ...rest } = d as Record<string, unknown>;
  return rest;
}

const err = (name: string, message: string) => expect.objectContaining({ attempt: 1, name, message, at: AT.toISOString() });

class SubSnooze extends SnoozeJobError {}

describe('decideOutcome: the handler returned', () => {
  it.each<[string, unknown, Case, Record<string, unknown>]>([
    ['a value completes with its JSON', { sent: 3 }, {}, { kind: 'completed', resultJson: '{"sent":3}', result: { sent: 3 } }],
    ['undefined completes with a null result', undefined, {}, { kind: 'completed', resultJson: null, result: undefined }],
    ['null is stored as JSON null', null, {}, { kind: 'completed', resultJson: 'null', result: null }],
    [
      'on its last attempt, it still completes',
      'ok',
      { attempt: 3, maxAttempts: 3 },
      { kind: 'completed', resultJson: '"ok"', result: 'ok' },
    ],
    [
      'after queue.cancel(id) reached it, completing wins',
      1,
      { cancelRequested: true },
      { kind: 'completed', resultJson: '1', result: 1 },
    ],
  ])('%s', (_what, value, c, expected) => {
    expect(shape(decide('returned', value, c))).toEqual({ id: '42', attempt: c.attempt ?? 1, ...expected });
  });

  it('after completeWith() wrote the completion, nothing is left to write (whatever it returned)', () => {
    expect(decide('returned', { sent: 3 }, { completedInTransaction: true })).toBe(ALREADY_WRITTEN);
    // Not even checked as JSON: the completion is written, with completeWith's own result.
    expect(decide('returned', new Map(), { completedInTransaction: true, cancelRequested: true })).toBe(ALREADY_WRITTEN);
  });

  it.each<[string, Case, Record<string, unknown>]>([
    ['attempts left: retries', {}, { kind: 'retry', delayMs: 1000 }],
    ['the last attempt: fails', { attempt: 3, maxAttempts: 3 }, { kind: 'failed' }],
    [
      'the last attempt, with a dead-letter queue: dead-letters',
      { attempt: 3, maxAttempts: 3, deadLetterQueue: 'dlq' },
      { kind: 'dead-letter', deadLetterQueue: 'dlq' },
    ],
    ['a cancel request: cancels', { cancelRequested: true }, { kind: 'cancelled' }],
  ])('a result JSON cannot carry fails the attempt as if thrown; %s', (_what, c, expected) => {
    const d = decide('returned', new Map([[1, 2]]), c);
    expect(d).toMatchObject(expected);
    if (expected.kind === 'cancelled') {
      expect(d).toMatchObject({ error: err('CancelJobError', 'Cancelled by queue.cancel() while running.') });
      return;
    }
    expect(d).toMatchObject({ error: { name: 'PgQueuePayloadError' } });
    expect((d as { thrown: unknown }).thrown).toBeInstanceOf(PgQueuePayloadError);
  });
});

describe('decideOutcome: the handler threw', () => {
  const boom = new Error('boom');
  it.each<[string, unknown, Case, Record<string, unknown>]>([
    [
      'an Error with attempts left retries after the backoff',
      boom,
      {},
      { kind: 'retry', delayMs: 1000, error: err('Error', 'boom') },
    ],
    [
      'a non-Error is recorded as NonError',
      'oops',
      {},
      { kind: 'retry', delayMs: 1000, error: err('NonError', 'Handler threw a non-Error value: oops') },
    ],
    ['an Error on the last attempt fails', boom, { attempt: 3, maxAttempts: 3 }, { kind: 'failed', error: expect.anything() }],
    [
      'past maxAttempts (lowered since) fails too',
      boom,
      { attempt: 5, maxAttempts: 3 },
      { kind: 'failed', attempt: 5, error: expect.anything() },
    ],
    [
      'the last attempt with a dead-letter queue dead-letters',
      boom,
      { attempt: 3, maxAttempts: 3, deadLetterQueue: 'dead' },
      { kind: 'dead-letter', deadLetterQueue: 'dead', error: expect.anything() },
    ],
    [
      'a dead-letter queue changes nothing while attempts are left',
      boom,
      { deadLetterQueue: 'dead' },
      { kind: 'retry', delayMs: 1000, error: expect.anything() },
    ],
    [
      'a timeout (JobTimeoutError) retries like any error',
      new JobTimeoutError(500),
      {},
      {
        kind: 'retry',
        delayMs: 1000,
        error: err('JobTimeoutError', 'Job exceeded its timeout of 500 ms; its AbortSignal was fired.'),
      },
    ],
    [
      'a lost lease (LeaseLostError) is decided like any error: the guarded write matches no row',
      new LeaseLostError('42'),
      { attempt: 3, maxAttempts: 3 },
      { kind: 'failed', error: expect.objectContaining({ name: 'LeaseLostError' }) },
    ],
    ['SnoozeJobError snoozes, the attempt not counted', new SnoozeJobError(60_000), {}, { kind: 'snoozed', delayMs: 60_000 }],
    [
      'SnoozeJobError on the last attempt still snoozes',
      new SnoozeJobError(0),
      { attempt: 3, maxAttempts: 3 },
      { kind: 'snoozed', attempt: 3, delayMs: 0 },
    ],
    [
      'SnoozeJobError after a cancel request cancels',
      new SnoozeJobError(10),
      { cancelRequested: true },
      { kind: 'cancelled', error: err('CancelJobError', 'Cancelled by queue.cancel() while running.') },
    ],
    [
      'CancelJobError cancels with its own message, attempts left or not',
      new CancelJobError('order deleted'),
      {},
      { kind: 'cancelled', error: err('CancelJobError', 'order deleted') },
    ],
    [
      'CancelJobError on the last attempt, with a dead-letter queue, still cancels',
      new CancelJobError('gone'),
      { attempt: 3, maxAttempts: 3, deadLetterQueue: 'dead' },
      { kind: 'cancelled', attempt: 3, error: expect.objectContaining({ message: 'gone' }) },
    ],
    [
      'UnrecoverableError fails at once, attempts left or not',
      new UnrecoverableError('card declined'),
      { attempt: 1, maxAttempts: 5 },
      { kind: 'failed', error: err('UnrecoverableError', 'card declined') },
    ],
    [
      'UnrecoverableError with a dead-letter queue dead-letters at once',
      new UnrecoverableError('card declined'),
      { attempt: 1, maxAttempts: 5, deadLetterQueue: 'dead' },
      { kind: 'dead-letter', deadLetterQueue: 'dead', error: expect.objectContaining({ name: 'UnrecoverableError' }) },
    ],
    [
      'a subclass of UnrecoverableError fails at once too',
      new (class PaymentRefused extends UnrecoverableError {})('refused'),
      {},
      { kind: 'failed', error: expect.objectContaining({ name: 'PaymentRefused', message: 'refused' }) },
    ],
    [
      'UnrecoverableError after a cancel request cancels (the cancel wins, as for any error)',
      new UnrecoverableError('late'),
      { cancelRequested: true },
      { kind: 'cancelled', error: err('CancelJobError', 'Cancelled by queue.cancel() while running.') },
    ],
    [
      'any error after a cancel request cancels (the AbortError of a stopped fetch, say)',
      new DOMException('This operation was aborted', 'AbortError'),
      { cancelRequested: true },
      { kind: 'cancelled', error: err('CancelJobError', 'Cancelled by queue.cancel() while running.') },
    ],
    [
      'CancelJobError after a cancel request keeps its own message',
      new CancelJobError('Cancelled by queue.cancel() while an earlier attempt ran.'),
      { cancelRequested: true },
      {
        kind: 'cancelled',
        error: expect.objectContaining({ message: 'Cancelled by queue.cancel() while an earlier attempt ran.' }),
      },
    ],
  ])('%s', (_what, value, c, expected) => {
    expect(shape(decide('threw', value, c))).toEqual({ id: '42', attempt: c.attempt ?? 1, ...expected });
  });

  it('a completion written in the transaction does not hide a later throw (its write then matches no row)', () => {
    expect(decide('threw', boom, { completedInTransaction: true })).toMatchObject({ kind: 'retry' });
  });

  it.each<[string, () => SnoozeJobError]>([
    ['a subclass', () => new SubSnooze(1000)],
    ['a delay changed after construction', () => Object.assign(new SnoozeJobError(1000), { delayMs: 1.5 }) as SnoozeJobError],
    ['a negative delay set later', () => Object.assign(new SnoozeJobError(1000), { delayMs: -1 }) as SnoozeJobError],
    ['a delay past 2^31-1', () => Object.assign(new SnoozeJobError(1000), { delayMs: MAX_DELAY_MS + 1 }) as SnoozeJobError],
  ])('a SnoozeJobError with an unusable delay (%s) fails the attempt, saying why', (what, make) => {
    const snooze = make();
    if (what === 'a subclass') {
      // A subclass with a usable delay snoozes: only the delay is checked.
      expect(decide('threw', snooze)).toMatchObject({ kind: 'snoozed', delayMs: 1000 });
      Object.assign(snooze, { delayMs: NaN });
    }
    const d = decide('threw', snooze);
    expect(d).toMatchObject({ kind: 'retry', error: { name: 'PgQueueConfigError' } });
    expect((d as { error: { message: string } }).error.message).toContain('the attempt failed instead of snoozing');
    // The span records what the handler threw, not the explanation.
    expect((d as { thrown: unknown }).thrown).toBe(snooze);
  });

  it('the stored error is the attempt error as JSON, and `thrown` is what was thrown', () => {
    const d = decide('threw', boom) as Extract<Decision, { kind: 'retry' }>;
    expect(JSON.parse(d.errorJson)).toEqual({
      attempt: 1,
      name: 'Error',
      message: 'boom',
      stack: boom.stack,
      at: AT.toISOString(),
    });
    expect(d.thrown).toBe(boom);
    expect(d.job.id).toBe('42');
  });
});

describe('decideOutcome: the retry delay', () => {
  it.each<[string, ResolvedBackoff, number, number]>([
    ['fixed waits delayMs on every attempt', FIXED, 2, 1000],
    ['exponential doubles per attempt', EXP, 3, 400],
    ['exponential is capped by maxDelayMs', { ...EXP, maxDelayMs: 250 }, 3, 250],
    ['jitter spreads over [d/2, d] (random 0.5: three quarters)', { ...FIXED, jitter: true }, 1, 750],
    ['a zero delay retries at once', { ...FIXED, delayMs: 0 }, 1, 0],
    ['a delay past what the statement accepts is clamped', { ...FIXED, delayMs: 2 ** 40, maxDelayMs: 2 ** 40 }, 1, MAX_DELAY_MS],
    ['a negative delay (a hand-written row) becomes 0', { ...FIXED, delayMs: -5, maxDelayMs: 10 }, 1, 0],
    ['a delay that is not a number becomes 0', { ...FIXED, delayMs: NaN }, 1, 0],
  ])('%s', (_what, backoff, attempt, delayMs) => {
    expect(decide('threw', new Error('x'), { backoff, attempt, maxAttempts: 10 })).toMatchObject({ kind: 'retry', delayMs });
  });
});

describe('decideOutcome: the attempt was abandoned at shutdown', () => {
  it.each<[string, Case]>([
    ['attempts left', {}],
    ['the last attempt', { attempt: 3, maxAttempts: 3 }],
    ['a cancel request', { cancelRequested: true }],
    ['completed in its transaction', { completedInTransaction: true }],
  ])('nothing is written, the job is handed back (%s)', (_what, c) => {
    expect(decide('abandoned', new ShutdownError(), c)).toBe(HAND_BACK);
  });
});

describe('storedResultJson', () => {
  const { job } = facts();
  it('stores plain data as JSON and undefined as null', () => {
    expect(storedResultJson(job, { a: [1, 'b'] })).toBe('{"a":[1,"b"]}');
    expect(storedResultJson(job, undefined)).toBeNull();
  });

  it.each([
    ['a Map', new Map()],
    ['NaN', NaN],
    ['a function', () => 1],
    ['half a surrogate pair', '\ud800'],
  ])('refuses %s with PgQueuePayloadError naming the job', (_what, value) => {
    expect(() => storedResultJson(job, value)).toThrow(PgQueuePayloadError);
    expect(() => storedResultJson(job, value)).toThrow(/Result of job 42 \("mail\/send"\) cannot be stored as JSON/);
  });
});

describe('usableBackoff', () => {
  it.each<[string, unknown, boolean]>([
    ['a valid fixed backoff', { type: 'fixed', delayMs: 10, maxDelayMs: 20, jitter: true }, true],
    ['one without jitter', { type: 'exponential', delayMs: 10, maxDelayMs: 20 }, true],
    ['null', null, false],
    ['a string', 'fixed', false],
    ['an unknown type', { type: 'linear', delayMs: 10, maxDelayMs: 20 }, false],
    ['a fractional delay', { type: 'fixed', delayMs: 1.5, maxDelayMs: 20 }, false],
    ['a negative delay', { type: 'fixed', delayMs: -1, maxDelayMs: 20 }, false],
    ['a delay past 2^31-1', { type: 'fixed', delayMs: 10, maxDelayMs: 2 ** 31 }, false],
    ['a jitter that is not a boolean', { type: 'fixed', delayMs: 10, maxDelayMs: 20, jitter: 'yes' }, false],
  ])('%s: %s', (_what, stored, usable) => {
    expect(usableBackoff(stored, FIXED)).toBe(usable ? stored : FIXED);
  });
});

describe("every write but a completion names the attempt's claim", () => {
  // The failure statements write onto the claim that started the attempt only (db/outcomes.ts,
  // claimedBy): a claim a crash forgot has the same worker and attempt number as the next one.
  const claimedAtMs = 1_796_399_368_667.834;
  it.each<[string, AttemptEnd, unknown, Case]>([
    ['retry', 'threw', new Error('boom'), {}],
    ['failed', 'threw', new Error('boom'), { attempt: 3 }],
    ['dead-letter', 'threw', new Error('boom'), { attempt: 3, deadLetterQueue: 'dead' }],
    ['cancelled', 'threw', new CancelJobError('stop'), {}],
    ['snoozed', 'threw', new SnoozeJobError(1000), {}],
  ])('%s carries it', (kind, end, value, c) => {
    const d = decide(end, value, { ...c, claimedAtMs });
    expect(d).toMatchObject({ kind, claimedAtMs });
  });

  it('a completion does not (a completion a crash forgot lands on no other run than one of its own)', () => {
    const d = decide('returned', 'ok', { claimedAtMs });
    expect(d.kind).toBe('completed');
    expect(d).not.toHaveProperty('claimedAtMs');
  });
});
