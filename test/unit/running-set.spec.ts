import { RunningJob } from '../../lib/worker/active-job';
import { Attempt, RunningSet } from '../../lib/worker/running-set';
import type { ResolvedBackoff } from '../../lib/core/options/resolved';
import { claimedRow } from '../support/job-row';

const BACKOFF: ResolvedBackoff = { type: 'fixed', delayMs: 1000, maxDelayMs: 60_000, jitter: false };

function attempt(id: string, claimedAtMs: number): Attempt {
  const row = claimedRow({ id, run_at_ms: claimedAtMs, created_at_ms: null, started_at_ms: claimedAtMs });
  return new Attempt(new RunningJob(row, 'mail'), BACKOFF, claimedAtMs);
}

describe('RunningSet', () => {
  it('an attempt a later claim of the same job replaced ends without taking that later attempt out of the set', () => {
    // A claim a crash forgot, and the same worker's new claim of the job (docs/reliability.md, case 4).
    const set = new RunningSet();
    const forgotten = attempt('7', 1000);
    const again = attempt('7', 5000);
    set.add(forgotten);
    set.add(again);
    expect(set.end(forgotten)).toBe(true);
    expect(set.get('7')).toBe(again);
    expect(set.ids()).toEqual(['7']);
    expect(set.end(again)).toBe(true);
    expect(set.size).toBe(0);
  });

  it('ends an attempt once', () => {
    const set = new RunningSet();
    const a = attempt('8', 1000);
    set.add(a);
    expect(set.end(a)).toBe(true);
    expect(set.end(a)).toBe(false);
    expect(set.size).toBe(0);
  });
});
