import { PgQueueConfigError, Process } from '../../lib';
import { resolveSchedule, type ResolvedSchedule } from '../../lib/core/cron-schedule';
import { resolveModuleOptions, resolveQueueOptions } from '../../lib/core/options/module-checks';

// Recurring jobs in a time zone: each wall-clock tick once, across daylight-saving changes, from
// wherever the scheduler asks (it asks again from "now" every hour while a timer waits, and the
// catch-up asks from the last tick or the window's start). No waiting: `next(from)` is pure.

const MIN = 60_000;
const HOUR = 60 * MIN;

/**
 * The ticks a scheduler sees when it asks `next(from)` from every minute of [start, end): the
 * answers, deduplicated as the database does (a tick only moves the schedule forward).
 */
function ticksSeen(s: ResolvedSchedule, start: string, end: string): string[] {
  const out: number[] = [];
  for (let f = Date.parse(start); f < Date.parse(end); f += MIN) {
    const t = s.next(new Date(f));
    expect(t).not.toBeNull();
    expect(t!.getTime()).toBeGreaterThan(f); // never a tick in the past (an armed timer would fire again and again)
    if (t!.getTime() < Date.parse(end) && !out.includes(t!.getTime())) out.push(t!.getTime());
  }
  return out.sort((a, b) => a - b).map((t) => new Date(t).toISOString());
}

describe('cron time zones across daylight-saving changes', () => {
  const berlin = resolveSchedule('q', { name: 'nightly', cron: '30 2 * * *', tz: 'Europe/Berlin' }, 'test');

  it('runs a 02:30 Europe/Berlin job once on the spring-forward day (02:30 does not exist: 03:30 CEST)', () => {
    expect(ticksSeen(berlin, '2026-03-28T12:00:00Z', '2026-03-29T22:00:00Z')).toEqual(['2026-03-29T01:30:00.000Z']);
  });

  it('runs a 02:30 Europe/Berlin job once on the fall-back day (02:30 happens twice), whatever hour it asks from', () => {
    expect(ticksSeen(berlin, '2026-10-24T12:00:00Z', '2026-10-25T23:00:00Z')).toEqual(['2026-10-25T01:30:00.000Z']);
    // From inside the first 02:xx hour (CEST) the tick still to come (02:30 CET) is not skipped.
    expect(berlin.next(new Date('2026-10-25T00:45:00Z'))?.toISOString()).toBe('2026-10-25T01:30:00.000Z');
  });

  it('steps the days around both changes one tick a day', () => {
    const chain = (from: string, n: number) => {
      const out: string[] = [];
      for (let t: Date | null = new Date(from); out.length < n;) out.push((t = berlin.next(t!))!.toISOString());
      return out;
    };
    expect(chain('2026-03-28T00:00:00Z', 3)).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:30:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(chain('2026-10-24T00:00:00Z', 3)).toEqual([
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T01:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
  });

  it.each([
    ['America/New_York', '30 * * * *', '2026-10-31T12:00:00Z', '2026-11-01T12:00:00Z', 23],
    ['America/New_York', '30 2 * * *', '2026-03-07T12:00:00Z', '2026-03-08T12:00:00Z', 1],
    ['Europe/Berlin', '*/15 * * * *', '2026-10-24T22:00:00Z', '2026-10-25T04:00:00Z', 19],
    ['Australia/Lord_Howe', '*/7 * * * *', '2026-04-04T13:00:00Z', '2026-04-04T17:00:00Z', 31],
  ])('%s %s: every tick once, none in the past, asked from every minute', (tz, cron, start, end, count) => {
    const s = resolveSchedule('q', { name: 'x', cron, tz }, 'test');
    const seen = ticksSeen(s, start, end);
    expect(seen).toHaveLength(count);
    // The same ticks stepping from tick to tick, as the timer does.
    const stepped: string[] = [];
    for (let t = s.next(new Date(start)); t && t.getTime() < Date.parse(end); t = s.next(t)) {
      stepped.push(t.toISOString());
    }
    expect(stepped).toEqual(seen);
  });

  it('keeps UTC schedules on the plain path', () => {
    const s = resolveSchedule('q', { name: 'x', cron: '30 2 * * *' }, 'test');
    expect(s.tz).toBe('UTC');
    expect(s.next(new Date('2026-10-25T00:45:00Z'))?.toISOString()).toBe('2026-10-25T02:30:00.000Z');
    expect(s.next(new Date('2026-10-25T02:30:00Z'))!.getTime() - Date.parse('2026-10-25T02:30:00Z')).toBe(24 * HOUR);
  });
});

describe('recurring job options', () => {
  const base = resolveModuleOptions({}).defaultJobOptions;
  const queue = (repeat: unknown) => () => resolveQueueOptions({ name: 'mail', repeat: repeat as [] }, base);

  it('refuses timezone (BullMQ spelling) instead of running in UTC, naming tz', () => {
    expect(queue([{ name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin' }])).toThrow(PgQueueConfigError);
    expect(queue([{ name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin' }])).toThrow(
      /Unknown option\(s\) in queue "mail" repeat\[0\]: "timezone" \(use tz \(an IANA name such as 'Europe\/Berlin'\)\)/,
    );
  });

  it.each([
    ['pattern', '0 3 * * *', /"pattern" \(use cron/],
    ['every', 60_000, /"every" \(use cron: an interval is a cron expression here/],
    ['data', { a: 1 }, /"data" \(use payload\)/],
    ['Tz', 'UTC', /"Tz" \(use tz\)/],
    ['limit', 3, /"limit" \(use nothing: remove the schedule/],
  ])('refuses %s with a hint', (key, value, message) => {
    expect(queue([{ name: 'nightly', cron: '0 3 * * *', [key]: value }])).toThrow(message);
  });

  it('accepts tz, payload and refuses an unknown IANA name at boot', () => {
    const q = queue([{ name: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlin', payload: { a: 1 } }])();
    expect(q.repeat[0]).toMatchObject({ tz: 'Europe/Berlin', payload: { a: 1 } });
    expect(queue([{ name: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlni' }])).toThrow(
      /time zone "Europe\/Berlni".*IANA time zone such as 'Europe\/Berlin'/,
    );
  });

  it('@Process({ timezone }) names tz', () => {
    expect(() => Process({ name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin' } as never)).toThrow(
      /unknown option "timezone" \(use tz, an IANA name such as 'Europe\/Berlin'\)/,
    );
  });
});
