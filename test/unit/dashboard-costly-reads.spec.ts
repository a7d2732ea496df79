import { CostlyReads } from '../../lib/dashboard/costly-reads';

// The dashboard's counts are reused while recent compared with what they cost (countsBudget).
describe('CostlyReads', () => {
  let clock = 0;
  const now = () => clock;
  /** A read that takes `ms` on the fake clock and answers how many times it ran. */
  const counter = (ms: number) => {
    let runs = 0;
    return async () => {
      clock += ms;
      return ++runs;
    };
  };
  beforeEach(() => (clock = 1_000_000));

  it('a read that took d ms is reused for d * (1 / budget - 1) ms after it ended, then run again', async () => {
    const reads = new CostlyReads(0.05, now);
    const run = counter(100);
    expect(await reads.read('k', run)).toBe(1);
    clock += 1899; // 100 ms * 19 = 1,900 ms
    expect(await reads.read('k', run)).toBe(1);
    clock += 1;
    expect(await reads.read('k', run)).toBe(2);
  });

  it('the budget is for all keys together: with two, each is reused twice as long', async () => {
    const reads = new CostlyReads(0.05, now);
    const a = counter(100);
    const b = counter(100);
    await reads.read('a', a);
    await reads.read('b', b);
    clock += 3899; // 100 ms * (2 / 0.05 - 1) = 3,900 ms after b ended
    expect(await reads.read('b', b)).toBe(1);
    clock += 1;
    expect(await reads.read('b', b)).toBe(2);
  });

  it('a cheap read is redone at every poll; budget 1 never reuses', async () => {
    const cheap = new CostlyReads(0.05, now);
    const run = counter(5);
    await cheap.read('k', run);
    clock += 2000;
    expect(await cheap.read('k', run)).toBe(2);
    const always = new CostlyReads(1, now);
    const r2 = counter(1000);
    await always.read('k', r2);
    await always.read('k2', counter(1000));
    expect(await always.read('k', r2)).toBe(2);
  });

  it('keys are apart; concurrent callers of one key share one run', async () => {
    const reads = new CostlyReads(0.05, now);
    let release = (): void => undefined;
    let runs = 0;
    const slow = () => new Promise<number>((r) => (release = () => r(++runs)));
    const a = reads.read('k', slow);
    const b = reads.read('k', slow);
    release();
    expect(await Promise.all([a, b])).toEqual([1, 1]);
    expect(await reads.read('other', counter(1))).toBe(1);
  });

  it('clear() makes the next read run, and a run that started before it is not kept', async () => {
    const reads = new CostlyReads(0.05, now);
    const run = counter(100);
    await reads.read('k', run);
    reads.clear();
    expect(await reads.read('k', run)).toBe(2);
    let release = (): void => undefined;
    const before = reads.read(
      'k2',
      () =>
        new Promise<string>(
          (r) =>
            (release = () => {
              clock += 100; // costly: kept for 1,900 ms, were it kept
              r('old');
            }),
        ),
    );
    reads.clear();
    release();
    expect(await before).toBe('old');
    expect(await reads.read('k2', async () => 'new')).toBe('new');
  });
});
