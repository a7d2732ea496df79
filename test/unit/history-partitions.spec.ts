import { PgQueueConfigError } from '../../lib';
import { resolveModuleOptions } from '../../lib/core/options/module-checks';
import { missingRanges, partitionName } from '../../lib/db/history/ranges';
import { idLookup } from '../../lib/db/history/by-id';

const H = 3_600_000;
const D = 24 * H;
const day = (iso: string) => Date.parse(`${iso}T00:00:00Z`);

describe('history partitions', () => {
  it('cover the current interval and two more, aligned on UTC midnight for days', () => {
    const now = day('2026-12-01') + 13 * H;
    expect(missingRanges(now, D, [], -Infinity)).toEqual([
      { lo: day('2026-12-01'), hi: day('2026-12-02') },
      { lo: day('2026-12-02'), hi: day('2026-12-03') },
      { lo: day('2026-12-03'), hi: day('2026-12-04') },
    ]);
  });

  it('leave out what exists and clip around it (an interval changed between runs)', () => {
    const now = day('2026-12-01') + 13 * H;
    const existing = [
      { lo: day('2026-12-01'), hi: day('2026-12-02') },
      { lo: day('2026-12-02'), hi: day('2026-12-02') + 6 * H },
    ];
    expect(missingRanges(now, D, existing, -Infinity)).toEqual([
      { lo: day('2026-12-02') + 6 * H, hi: day('2026-12-03') },
      { lo: day('2026-12-03'), hi: day('2026-12-04') },
    ]);
    // Hourly: a partition that ends inside the hour leaves the rest of that hour.
    expect(missingRanges(10 * H + 60_000, H, [{ lo: 9 * H, hi: 10 * H + 30 * 60_000 }], -Infinity, 0)).toEqual([
      { lo: 10 * H + 30 * 60_000, hi: 11 * H },
    ]);
  });

  it('start no earlier than job_history_current (rows before it go to the old table)', () => {
    const now = day('2026-12-01') + 13 * H;
    expect(missingRanges(now, D, [], day('2026-12-02'))).toEqual([
      { lo: day('2026-12-02'), hi: day('2026-12-03') },
      { lo: day('2026-12-03'), hi: day('2026-12-04') },
    ]);
  });

  it('are named by their lower bound in UTC, to the minute', () => {
    expect(partitionName(day('2026-12-01') + 13 * H + 30 * 60_000)).toBe('job_history_p20261201t1330');
  });

  it('span whole hours from one hour to 31 days (historyPartitionMs), daily by default', () => {
    expect(resolveModuleOptions({}).historyPartitionMs).toBe(D);
    expect(resolveModuleOptions({ historyPartitionMs: H }).historyPartitionMs).toBe(H);
    expect(() => resolveModuleOptions({ historyPartitionMs: 90 * 60_000 })).toThrow(
      /historyPartitionMs: 5400000 is not a whole number of hours. Use a multiple of 3600000/,
    );
    expect(() => resolveModuleOptions({ historyPartitionMs: 60_000 })).toThrow(PgQueueConfigError);
    expect(() => resolveModuleOptions({ historyPartitionMs: 32 * D })).toThrow(/historyPartitionMs.*above/);
  });
});

describe('idLookup: which closed partitions a lookup by id visits', () => {
  const D = 86_400_000;
  const p = (day: number, minId: number | null, maxId: number | null) => ({
    lo: day * D,
    hi: (day + 1) * D,
    minId: minId === null ? null : BigInt(minId),
    maxId: maxId === null ? null : BigInt(maxId),
  });
  const closed = [p(1, 1, 100), p(2, 90, 200), p(3, null, null), p(4, 5, 400), p(5, 300, 350)];
  const at = (d: Date | string | null) => (d instanceof Date ? d.getTime() / D : d);

  it('C is the end of the newest closed partition; none closed: every finish time is open', () => {
    expect(at(idLookup(closed, 1000n)[0])).toBe(6);
    expect(idLookup([], 7n)[0]).toBe('-infinity');
    expect(idLookup(closed, 1000n).slice(1)).toEqual([null, null, null, null]);
  });

  it('one range for the first partition whose ids hold it, a second covering all the others; empty ones never', () => {
    expect(idLookup(closed, 150n).slice(1).map(at)).toEqual([2, 3, 4, 5]);
    expect(idLookup(closed, 95n).slice(1).map(at)).toEqual([1, 2, 2, 5]);
    expect(idLookup(closed, 320n).slice(1).map(at)).toEqual([4, 5, 5, 6]);
    expect(idLookup(closed, 2n).slice(1).map(at)).toEqual([1, 2, null, null]);
  });
});
