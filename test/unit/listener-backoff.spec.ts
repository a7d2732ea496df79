import { reconnectDelayMs } from '../../lib/worker/listener';

describe('listener reconnect delay', () => {
  it('doubles from the first delay and never exceeds the cap, whatever the jitter draws', () => {
    const highest = Array.from({ length: 12 }, (_, i) => reconnectDelayMs(i + 1, 100, 5000, () => 1));
    expect(highest).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000, 5000]);
    for (const attempt of [1, 7, 30, 1000, 1e9])
      expect(reconnectDelayMs(attempt, 100, 5000, () => 0.999999)).toBeLessThanOrEqual(5000);
  });

  it('spreads each delay over the upper half [d/2, d]', () => {
    expect(reconnectDelayMs(3, 100, 5000, () => 0)).toBe(200);
    expect(reconnectDelayMs(3, 100, 5000, () => 0.5)).toBe(300);
    expect(reconnectDelayMs(20, 100, 5000, () => 0)).toBe(2500);
  });
});
