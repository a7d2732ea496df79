import { ClaimBuffer } from '../../lib/worker/claim-buffer';
import { WakeTimer } from '../../lib/worker/wake-timer';
import type { ClaimedRow } from '../../lib/db/job-store';

// The worker loop's books (lib/worker/claim-buffer.ts, wake-timer.ts): the claim loop's mode and
// the one-shot wake-up that keeps the earliest time asked for.

const row = (id: number) => ({ id: String(id), priority: 0, run_at_ms: 0 }) as unknown as ClaimedRow;

describe('ClaimBuffer modes', () => {
  it('claims from the start; a short claim waits; a wake-up claims again', () => {
    const b = new ClaimBuffer();
    expect(b.mode).toBe('claiming');
    b.cameBackShort();
    expect([b.mode, b.claiming, b.wakeable]).toEqual(['waiting', false, true]);
    b.woken();
    expect(b.mode).toBe('claiming');
  });

  it('manual mode ignores wake-ups and short claims; released is final', () => {
    const b = new ClaimBuffer();
    b.manual();
    b.woken();
    b.cameBackShort();
    expect([b.mode, b.wakeable]).toEqual(['manual', false]);
    b.release();
    b.woken();
    b.cameBackShort();
    expect([b.mode, b.released, b.wakeable]).toEqual(['released', true, false]);
  });

  it('keeps rows oldest first with their arrival, removes one by id, and hands back the rest', () => {
    const b = new ClaimBuffer();
    b.push([row(1), row(2)], 100);
    b.push([row(3)], 200);
    expect([b.length, b.oldestAt, b.ids()]).toEqual([3, 100, ['1', '2', '3']]);
    expect(b.remove('2')?.id).toBe('2');
    expect(b.remove('9')).toBeNull();
    expect(b.shift().id).toBe('1');
    expect(b.oldestAt).toBe(200);
    expect(b.take()).toEqual(['3']);
    expect([b.length, b.oldestAt]).toEqual([0, undefined]);
  });
});

describe('WakeTimer', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('keeps the earliest time asked for: a later one is dropped, an earlier one replaces it', () => {
    const fired: number[] = [];
    const t = new WakeTimer(() => fired.push(Date.now()));
    const start = Date.now();
    t.arm(1000, 0);
    t.arm(5000, 0); // later: dropped
    expect(t.armed).toBe(true);
    jest.advanceTimersByTime(500);
    t.arm(600, 0); // due at 1,100: later than 1,000, dropped
    t.arm(100, 0); // due at 600: earlier, replaces
    jest.advanceTimersByTime(100);
    expect(fired).toEqual([start + 600]);
    expect(t.armed).toBe(false);
    jest.advanceTimersByTime(10_000);
    expect(fired).toHaveLength(1);
  });

  it('fires slackMs late, is free again after firing, and clear() cancels', () => {
    let n = 0;
    const t = new WakeTimer(() => n++);
    t.arm(10, 5);
    jest.advanceTimersByTime(14);
    expect(n).toBe(0);
    jest.advanceTimersByTime(1);
    expect(n).toBe(1);
    t.arm(50, 0); // after firing, a later time is taken again
    t.clear();
    jest.advanceTimersByTime(100);
    expect(n).toBe(1);
  });
});
