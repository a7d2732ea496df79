import { plansOutgrown } from '../../lib/worker/vacuum';

// When the maintenance pass analyses the jobs table so that cached plans are made again
// (lib/worker/vacuum.ts): once the heap has doubled since its size was last recorded, from 32 pages.

describe('plansOutgrown', () => {
  it('leaves a small heap alone, even one never analysed', () => {
    expect(plansOutgrown({ pages: 0, recordedPages: 0 })).toBe(false);
    expect(plansOutgrown({ pages: 31, recordedPages: 0 })).toBe(false);
  });

  it('replans a heap of 32 pages or more that has doubled since it was recorded', () => {
    expect(plansOutgrown({ pages: 32, recordedPages: 0 })).toBe(true);
    expect(plansOutgrown({ pages: 120, recordedPages: 60 })).toBe(true);
    expect(plansOutgrown({ pages: 5000, recordedPages: 40 })).toBe(true);
  });

  it('does not replan a heap that grew less than twofold, or shrank', () => {
    expect(plansOutgrown({ pages: 119, recordedPages: 60 })).toBe(false);
    expect(plansOutgrown({ pages: 60, recordedPages: 60 })).toBe(false);
    expect(plansOutgrown({ pages: 40, recordedPages: 500 })).toBe(false);
  });
});
