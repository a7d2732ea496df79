import { attemptErrorJson, backoffDelayMs, toAttemptError } from '../../lib/worker/retry-policy';
import { DEFAULTS } from '../../lib/core/options/defaults';
import { resolveJobDefaults } from '../../lib/core/options/job-checks';
import type { ResolvedJobDefaults } from '../../lib/core/options/resolved';
import type { JobOptions } from '../../lib';

describe('backoff', () => {
  const exp = { type: 'exponential' as const, delayMs: 100, maxDelayMs: 1000, jitter: false };

  it('doubles from delayMs and caps at maxDelayMs', () => {
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelayMs(exp, a))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('fixed is constant', () => {
    expect([1, 5, 50].map((a) => backoffDelayMs({ ...exp, type: 'fixed' }, a))).toEqual([100, 100, 100]);
  });

  it('jitter spreads over [d/2, d]', () => {
    const j = { ...exp, jitter: true };
    expect(backoffDelayMs(j, 3, () => 0)).toBe(200);
    expect(backoffDelayMs(j, 3, () => 1)).toBe(400);
  });

  it('does not overflow for huge attempt numbers', () => {
    expect(backoffDelayMs(exp, 10_000)).toBe(1000);
  });
});

describe('a partial backoff over the defaults', () => {
  const resolved = (opts: JobOptions, base: ResolvedJobDefaults = DEFAULTS.job) => resolveJobDefaults('job', opts, base).backoff;
  const randoms = [() => 0, () => 0.37, () => 0.999];

  it('fixed without jitter waits exactly delayMs, over the default exponential backoff with jitter', () => {
    const b = resolved({ backoff: { type: 'fixed', delayMs: 500 } });
    expect(b).toEqual({ type: 'fixed', delayMs: 500, maxDelayMs: 3_600_000, jitter: false });
    for (const random of randoms) for (const attempt of [1, 2, 7]) expect(backoffDelayMs(b, attempt, random)).toBe(500);
  });

  it('fixed with jitter: true still spreads', () => {
    const b = resolved({ backoff: { type: 'fixed', delayMs: 500, jitter: true } });
    expect(randoms.map((r) => backoffDelayMs(b, 1, r))).toEqual([250, 343, 500]);
  });

  it('takes jitter from a layer below of the same type, and delays from any layer below', () => {
    const queue = resolveJobDefaults(
      'queue',
      { backoff: { type: 'fixed', delayMs: 200, maxDelayMs: 900, jitter: true } },
      DEFAULTS.job,
    );
    expect(resolved({ backoff: { type: 'fixed', delayMs: 300 } }, queue)).toEqual({
      type: 'fixed',
      delayMs: 300,
      maxDelayMs: 900,
      jitter: true,
    });
    expect(resolved({ backoff: { type: 'exponential' } }, queue)).toEqual({
      type: 'exponential',
      delayMs: 200,
      maxDelayMs: 900,
      jitter: true,
    });
    expect(resolved({ backoff: { type: 'exponential', delayMs: 100 } })).toEqual({ ...DEFAULTS.job.backoff, delayMs: 100 });
  });
});

describe('attempt errors', () => {
  it('keeps name, message and stack of an Error', () => {
    const e = toAttemptError(new RangeError('bad'), 2, new Date(0));
    expect(e).toMatchObject({ attempt: 2, name: 'RangeError', message: 'bad', at: '1970-01-01T00:00:00.000Z' });
    expect(e.stack).toContain('RangeError: bad');
  });

  it.each([
    ['a string', 'oops', 'oops'],
    ['an object', { code: 42 }, '{"code":42}'],
    ['undefined', undefined, 'undefined'],
    ['a BigInt', 5n, '5'],
  ])('records %s thrown as a NonError', (_what, value, text) => {
    const e = toAttemptError(value, 1);
    expect(e.name).toBe('NonError');
    expect(e.message).toContain(text);
  });

  it('never throws, whatever was thrown', () => {
    const unprintable = Object.assign(Object.create(null) as object, { n: 1n }); // JSON and String() both throw
    expect(toAttemptError(unprintable, 1)).toMatchObject({
      name: 'NonError',
      message: 'Handler threw a non-Error value: [object Object]',
    });
    const unreadable = new Error('x');
    Object.defineProperty(unreadable, 'message', {
      get() {
        throw new Error('no');
      },
    });
    expect(toAttemptError(unreadable, 1)).toMatchObject({ name: 'Error', message: expect.stringContaining('cannot be read') });
  });

  it('stores what jsonb refuses (NUL, half a surrogate pair) as U+FFFD', () => {
    const e = toAttemptError(new Error('a\u0000b 😀'.slice(0, -1)), 1, new Date(0));
    expect(JSON.parse(attemptErrorJson(e)).message).toBe('a\ufffdb \ufffd');
  });
});
