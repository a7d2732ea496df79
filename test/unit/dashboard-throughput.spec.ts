import { firstOpenMinute, SETTLE_MS } from '../../lib/dashboard/dashboard-throughput';

// Which minutes of the overview's chart the next poll counts again: a minute is final once it
// ended SETTLE_MS ago (an outcome commits within milliseconds of its finished_at).
describe('firstOpenMinute', () => {
  const minutes = ['2026-01-01T10:57:00.000Z', '2026-01-01T10:58:00.000Z', '2026-01-01T10:59:00.000Z'];
  const at = (iso: string) => new Date(iso);

  it('keeps the previous minute open until SETTLE_MS after it ended', () => {
    expect(SETTLE_MS).toBe(10_000);
    expect(firstOpenMinute(minutes, at('2026-01-01T10:59:00.000Z'))).toBe('2026-01-01T10:58:00.000Z');
    expect(firstOpenMinute(minutes, at('2026-01-01T10:59:09.999Z'))).toBe('2026-01-01T10:58:00.000Z');
  });

  it('then only the current minute', () => {
    expect(firstOpenMinute(minutes, at('2026-01-01T10:59:10.000Z'))).toBe('2026-01-01T10:59:00.000Z');
    expect(firstOpenMinute(minutes, at('2026-01-01T10:59:59.999Z'))).toBe('2026-01-01T10:59:00.000Z');
  });

  it('a clock behind the minutes leaves them all open; one far ahead settles them all', () => {
    expect(firstOpenMinute(minutes, at('2026-01-01T10:00:00.000Z'))).toBe('2026-01-01T10:57:00.000Z');
    expect(firstOpenMinute(minutes, at('2026-01-01T11:30:00.000Z'))).toBeNull();
    expect(firstOpenMinute([], at('2026-01-01T11:30:00.000Z'))).toBeNull();
  });
});
