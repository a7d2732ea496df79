import { timeline } from '../../lib/dashboard/job-timeline';
import type { DashboardJob } from '../../lib/core/dashboard-reads';

const T = (s: number) => new Date(Date.UTC(2026, 0, 1, 10, 0, s));

function job(o: Partial<DashboardJob>): DashboardJob {
  return {
    id: '1',
    queue: 'q',
    name: 'n',
    payload: {},
    state: 'waiting',
    priority: 0,
    attempt: 0,
    maxAttempts: 3,
    runAt: T(0),
    createdAt: T(0),
    startedAt: null,
    finishedAt: null,
    errors: [],
    result: null,
    uniqueKey: null,
    lockedBy: null,
    history: false,
    ...o,
  } as unknown as DashboardJob;
}

const err = (attempt: number, at: Date, worker = 'node-a', name = 'Error') => ({
  attempt,
  name,
  message: 'boom',
  at: at.toISOString(),
  worker,
});

describe('job timeline', () => {
  it('each attempt once, in order, whatever the worker clock says; the last on the database clock with its duration', () => {
    // The worker's clock runs 30 s behind: attempt 2's error says 10:00:05, the database started it at 10:00:20.
    const j = job({
      state: 'failed',
      attempt: 2,
      startedAt: T(20),
      finishedAt: T(26),
      lockedBy: 'node-b',
      errors: [err(1, T(3)), err(2, T(5), 'node-b')],
      history: true,
    });
    const t = timeline(j);
    expect(t.map((e) => `${e.event} ${e.attempt} ${e.outcome ?? ''}`.trim())).toEqual([
      'created 0',
      'attempt 1 error',
      'attempt 2 failed',
    ]);
    expect(t[1]).toMatchObject({
      startedAt: null,
      endedAt: T(3).toISOString(),
      durationMs: null,
      clock: 'worker',
      node: 'node-a',
    });
    expect(t[2]).toEqual({
      at: T(20),
      event: 'attempt',
      attempt: 2,
      startedAt: T(20),
      endedAt: T(26),
      durationMs: 6000,
      outcome: 'failed',
      node: 'node-b',
      error: 'Error: boom',
    });
  });

  it('completed after a failure; running; waiting for its next attempt with the due time', () => {
    const done = timeline(
      job({ state: 'completed', attempt: 2, startedAt: T(10), finishedAt: T(12), lockedBy: 'n', errors: [err(1, T(5))] }),
    );
    expect(done.map((e) => e.outcome ?? e.event)).toEqual(['created', 'error', 'completed']);
    expect(done[2]).toMatchObject({ startedAt: T(10), endedAt: T(12), durationMs: 2000 });
    const running = timeline(job({ state: 'active', attempt: 1, startedAt: T(4), lockedBy: 'n' }));
    expect(running[1]).toMatchObject({ event: 'attempt', outcome: 'running', startedAt: T(4), endedAt: null });
    const retrying = timeline(job({ state: 'delayed', attempt: 1, startedAt: T(4), runAt: T(30), errors: [err(1, T(6))] }));
    expect(retrying.map((e) => e.event)).toEqual(['created', 'attempt', 'due']);
    expect(retrying[1]).toMatchObject({ startedAt: T(4), outcome: 'error', clock: 'worker' });
    expect(retrying[2]).toMatchObject({ at: T(30), attempt: 2 });
  });

  it('a cancel while waiting is the end without an attempt, not one more attempt', () => {
    const cancel = {
      attempt: 1,
      name: 'CancelJobError',
      message: 'Cancelled by queue.cancel() while waiting.',
      at: T(9).toISOString(),
    };
    const t = timeline(
      job({ state: 'cancelled', attempt: 1, startedAt: T(4), finishedAt: T(9), errors: [err(1, T(6)), cancel] }),
    );
    expect(t.map((e) => `${e.event}${e.outcome ? ` ${e.outcome}` : ''}`)).toEqual(['created', 'attempt error', 'cancelled']);
    expect(t[2].at).toEqual(T(9));
  });

  it('a job retried from the dashboard (attempts start over) lists the old attempt and the new one', () => {
    const t = timeline(job({ state: 'completed', attempt: 1, startedAt: T(20), finishedAt: T(21), errors: [err(1, T(5))] }));
    expect(t.map((e) => `${e.attempt} ${e.outcome ?? e.event}`)).toEqual(['0 created', '1 error', '1 completed']);
  });

  it('uses the database times an error records', () => {
    const e = { ...err(1, T(6)), startedAt: T(1).toISOString(), endedAt: T(4).toISOString() };
    const t = timeline(job({ state: 'completed', attempt: 2, startedAt: T(10), finishedAt: T(11), errors: [e] }));
    expect(t[1]).toMatchObject({ startedAt: T(1).toISOString(), endedAt: T(4).toISOString(), durationMs: 3000 });
    expect(t[1].clock).toBeUndefined();
  });
});
