import { MAX_CATCH_UP, firstTick, planTicks, resolveSchedulerTiming, stepOf } from '../../lib/core/job-scheduler';

// The pure part of a scheduler's tick: which ticks a pass enqueues (catch-up window, the grace
// for a late tick, the per-pass cap, limit, endDate) and a new scheduler's first tick.

const every = (ms: number) => stepOf({ pattern: null, everyMs: ms, tz: 'UTC' }, 'test');
const at = (iso: string) => new Date(iso);
const iso = (d: Date[]) => d.map((x) => x.toISOString());

describe('planTicks', () => {
  const base = { everyMs: 60_000, endAt: null, limit: null, count: 0 };

  it('runs a tick a few seconds late even with cronCatchUpMs 0 (lateness is not downtime)', () => {
    const p = planTicks({ ...base, due: at('2030-01-01T00:00:00Z') }, every(60_000), at('2030-01-01T00:00:05Z'), 0);
    expect(iso(p.runs)).toEqual(['2030-01-01T00:00:00.000Z']);
    expect(p.next!.toISOString()).toBe('2030-01-01T00:01:00.000Z');
  });

  it('skips ticks older than the window after downtime, by arithmetic for an interval', () => {
    const p = planTicks({ ...base, due: at('2030-01-01T00:00:00Z') }, every(60_000), at('2030-01-01T10:00:30Z'), 120_000);
    // The window is max(cronCatchUpMs, the one-minute grace): 09:58:30 on; 09:59 and 10:00 run.
    expect(iso(p.runs)).toEqual(['2030-01-01T09:59:00.000Z', '2030-01-01T10:00:00.000Z']);
  });

  it('enqueues at most MAX_CATCH_UP ticks per pass and leaves the scheduler due for the next pass', () => {
    const p = planTicks(
      { ...base, everyMs: 1000, due: at('2030-01-01T00:00:00Z') },
      every(1000),
      at('2030-01-01T00:30:00Z'),
      3_600_000,
    );
    expect(p.runs).toHaveLength(MAX_CATCH_UP);
    expect(p.next!.getTime()).toBe(at('2030-01-01T00:00:00Z').getTime() + MAX_CATCH_UP * 1000);
  });

  it('ends the scheduler at its limit and at endDate', () => {
    const limit = planTicks(
      { ...base, limit: 3, count: 2, due: at('2030-01-01T00:00:00Z') },
      every(60_000),
      at('2030-01-01T00:05:00Z'),
      3_600_000,
    );
    expect(limit).toEqual({ runs: [at('2030-01-01T00:00:00Z')], next: null });
    const end = planTicks(
      { ...base, endAt: at('2030-01-01T00:01:30Z'), due: at('2030-01-01T00:00:00Z') },
      every(60_000),
      at('2030-01-01T00:05:00Z'),
      3_600_000,
    );
    expect(end).toEqual({ runs: [at('2030-01-01T00:00:00Z'), at('2030-01-01T00:01:00Z')], next: null });
  });
});

describe('firstTick', () => {
  const now = at('2030-01-01T10:17:00Z');
  const first = (r: Parameters<typeof resolveSchedulerTiming>[1]) => {
    const t = resolveSchedulerTiming('test', r);
    return firstTick(t, stepOf(t, 'test'), now)?.toISOString() ?? null;
  };

  it('every starts at once (null: the database clock) or at startDate; a pattern at its next tick, or at once with immediately', () => {
    expect(first({ every: 60_000 })).toBeNull();
    expect(first({ every: 60_000, startDate: '2030-02-01T00:00:00Z' })).toBe('2030-02-01T00:00:00.000Z');
    expect(first({ pattern: '0 * * * *' })).toBe('2030-01-01T11:00:00.000Z');
    expect(first({ pattern: '0 * * * *', immediately: true })).toBeNull();
    expect(first({ pattern: '0 * * * *', startDate: '2030-02-01T00:00:00Z' })).toBe('2030-02-01T00:00:00.000Z');
  });
});
