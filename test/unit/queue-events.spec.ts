import { JobFinishedWithError, JobNotFoundError, OnQueueEvent, OnWorkerEvent, PgQueueConfigError } from '../../lib';
import type { ConfirmRow } from '../../lib/db/events';
import { confirmHint, parseEventPayload, type EventHint } from '../../lib/worker/event-confirm';
import { waitVerdict } from '../../lib/worker/wait-for-job';

// The pure parts of the cross-process events: what a notification says, and what the rows must
// say before an event fires (a notification is a hint; any role that can connect may send one).
// The same against a real database, with forged NOTIFYs: test/integration/queue-events.int-spec.ts.

function row(over: Partial<ConfirmRow>): ConfirmRow {
  return {
    live: true,
    id: '7',
    queue: 'q',
    name: 'n',
    payload: {},
    state: 'waiting',
    priority: 0,
    run_at: new Date(0),
    attempt: 1,
    max_attempts: 3,
    backoff: null,
    timeout_ms: null,
    errors: [],
    created_at: new Date(0),
    started_at: null,
    finished_at: null,
    result: null,
    progress: null,
    unique_key: null,
    group_key: null,
    released: false,
    ...over,
  };
}
const hint = (kind: EventHint['kind'], attempt = 1, queue = 'q'): EventHint => ({ kind, queue, id: '7', attempt });
const err = (attempt: number, name = 'Error') => ({ attempt, name, message: `boom ${attempt}`, at: '' });

describe('parseEventPayload', () => {
  it('reads kind, queue and id.attempt entries; a queue may hold "|"', () => {
    expect(parseEventPayload('completed|a|b|1.1,22.3')).toEqual([
      { kind: 'completed', queue: 'a|b', id: '1', attempt: 1 },
      { kind: 'completed', queue: 'a|b', id: '22', attempt: 3 },
    ]);
  });

  it('skips what is not ours, never throws', () => {
    for (const p of ['', 'completed', 'completed|q', 'nope|q|1.1', 'active|q|1.1', '|q|1.1'])
      expect(parseEventPayload(p)).toEqual([]);
    expect(parseEventPayload('failed|q|0.1,x.1,1.-1,1,99999999999999999999.1,5.2')).toEqual([
      { kind: 'failed', queue: 'q', id: '5', attempt: 2 },
    ]);
  });
});

describe('confirmHint: an event fires only for what the rows bear out', () => {
  it('completed: the history row of that queue is completed; its result comes from the row', () => {
    const done = row({ live: false, state: 'completed', result: { ok: 1 } });
    expect(confirmHint(hint('completed'), [done])).toMatchObject({ event: 'completed', args: [{ id: '7' }, { ok: 1 }] });
    expect(confirmHint(hint('completed'), [row({})])).toBeNull(); // still waiting: forged
    expect(confirmHint(hint('completed'), [])).toBeNull(); // no such job
    expect(confirmHint(hint('completed', 1, 'other'), [done])).toBeNull(); // another queue's job
    expect(confirmHint(hint('completed'), [row({ live: false, state: 'failed', errors: [err(1)] })])).toBeNull();
  });

  it('failed and cancelled: the history row is in that state, with its last error', () => {
    const failed = row({ live: false, state: 'failed', errors: [err(1), err(2)] });
    expect(confirmHint(hint('failed', 2), [failed])).toMatchObject({ event: 'failed', args: [{}, { message: 'boom 2' }] });
    expect(confirmHint(hint('cancelled', 2), [failed])).toBeNull();
  });

  it("retrying and stalled: a row of that queue holds that attempt's error (stalled: a LeaseExpiredError)", () => {
    const retried = row({ state: 'waiting', errors: [err(1)] });
    expect(confirmHint(hint('retrying', 1), [retried])).toMatchObject({ event: 'retrying', args: [{}, { message: 'boom 1' }] });
    expect(confirmHint(hint('retrying', 2), [retried])).toBeNull();
    expect(confirmHint(hint('stalled', 1), [retried])).toBeNull();
    const rescued = row({ errors: [err(1, 'LeaseExpiredError')] });
    expect(confirmHint(hint('stalled', 1), [rescued])).toMatchObject({ event: 'stalled' });
    expect(confirmHint(hint('retrying', 1), [rescued])).toBeNull();
  });

  it('deadLettered: the row moved to another queue holding that attempt error', () => {
    expect(confirmHint(hint('deadLettered', 3), [row({ queue: 'dlq', attempt: 0, errors: [err(3)] })])).toMatchObject({
      event: 'deadLettered',
    });
    expect(confirmHint(hint('deadLettered', 3), [row({ attempt: 0, errors: [err(3)] })])).toBeNull(); // never moved
  });

  it('snoozed and progress: the live row is on that attempt (progress: running, with a value)', () => {
    expect(confirmHint(hint('snoozed', 0), [row({ attempt: 0 })])).toMatchObject({ event: 'snoozed' });
    expect(confirmHint(hint('snoozed', 0), [row({ attempt: 0, state: 'active' })])).toBeNull();
    expect(confirmHint(hint('parked', 0), [row({ attempt: 0 })])).toMatchObject({ event: 'parked' });
    expect(confirmHint(hint('parked', 0), [row({ attempt: 0, state: 'active' })])).toBeNull();
    expect(confirmHint(hint('progress', 1), [row({ state: 'active', progress: 40 })])).toMatchObject({ args: [{}, 40] });
    expect(confirmHint(hint('progress', 1), [row({ state: 'active' })])).toBeNull();
    expect(confirmHint(hint('progress', 1), [row({ live: false, state: 'completed', progress: 100 })])).toMatchObject({
      args: [{}, 100],
    });
    expect(confirmHint(hint('progress', 2), [row({ state: 'active', progress: 40 })])).toBeNull();
  });

  it('released: a row of that queue whose dependencies all ended without failing it, on that attempt or later', () => {
    // Released and waiting, or already run since (live active, or finished): the job as read.
    expect(confirmHint(hint('released', 0), [row({ attempt: 0, released: true })])).toMatchObject({
      event: 'released',
      args: [{ id: '7', state: 'waiting' }],
    });
    expect(confirmHint(hint('released', 0), [row({ state: 'active', released: true })])).toMatchObject({ event: 'released' });
    const ran = row({ live: false, state: 'completed', released: true });
    expect(confirmHint(hint('released', 0), [ran])).toMatchObject({ event: 'released', args: [{ state: 'completed' }] });
    // Forged: a plain waiting job, one still waiting on children, one failed by its child (the
    // SQL's released is false for each), another queue's parent, an attempt it never reached.
    expect(confirmHint(hint('released', 0), [row({ attempt: 0 })])).toBeNull();
    expect(confirmHint(hint('released', 0), [row({ attempt: 0, state: 'waiting-children' })])).toBeNull();
    expect(
      confirmHint(hint('released', 0), [row({ live: false, state: 'failed', attempt: 0, errors: [err(0, 'ChildFailedError')] })]),
    ).toBeNull();
    expect(confirmHint(hint('released', 0, 'other'), [row({ attempt: 0, released: true })])).toBeNull();
    expect(confirmHint(hint('released', 2), [row({ attempt: 1, released: true })])).toBeNull();
    expect(confirmHint(hint('released', 0), [])).toBeNull();
  });
});

describe('waitVerdict', () => {
  it('resolves a completed job with its result, rejects failed and cancelled ones with their last error', () => {
    expect(waitVerdict('q', '7', [row({ live: false, state: 'completed', result: 'r' })])).toEqual({
      done: true,
      ok: true,
      result: 'r',
    });
    const v = waitVerdict('q', '7', [row({ live: false, state: 'cancelled', errors: [err(1, 'CancelJobError')] })]);
    expect(v).toMatchObject({ done: true, ok: false });
    const e = (v as { error: Error }).error as JobFinishedWithError;
    expect(e).toBeInstanceOf(JobFinishedWithError);
    expect(e.state).toBe('cancelled');
    expect(e.lastError?.name).toBe('CancelJobError');
  });

  it('keeps waiting on a live job; a job moved to its dead-letter queue failed; no row is not found', () => {
    expect(waitVerdict('q', '7', [row({ state: 'active' })])).toEqual({ done: false });
    expect(waitVerdict('q', '7', [row({ queue: 'dlq', errors: [err(3)] })])).toMatchObject({ done: true, ok: false });
    expect((waitVerdict('q', '7', []) as { error: Error }).error).toBeInstanceOf(JobNotFoundError);
    expect((waitVerdict('q', '7', [row({ queue: 'other' })]) as { error: Error }).error).toBeInstanceOf(JobNotFoundError);
  });
});

describe('@OnQueueEvent and @OnWorkerEvent', () => {
  it('refuses an in-process event name on @OnQueueEvent, naming @OnWorkerEvent; takes the cross-process names', () => {
    for (const name of ['active', 'outcomeDropped']) {
      expect(() => OnQueueEvent(name as never)).toThrow(PgQueueConfigError);
      expect(() => OnQueueEvent(name as never)).toThrow(new RegExp(`use @OnWorkerEvent\\("${name}"\\)`));
      expect(() => OnWorkerEvent(name as never)).not.toThrow();
    }
    for (const name of [
      'completed',
      'failed',
      'retrying',
      'cancelled',
      'snoozed',
      'deadLettered',
      'stalled',
      'progress',
      'released',
      'parked',
      'lagged',
    ]) {
      expect(() => OnQueueEvent(name as never)).not.toThrow();
    }
    expect(() => OnQueueEvent('complete' as never)).toThrow(/unknown event; use one of completed/);
    expect(() => OnWorkerEvent('lagged' as never)).toThrow(/unknown event/);
  });
});
