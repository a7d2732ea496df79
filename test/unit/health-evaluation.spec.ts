import { PgQueueConfigError } from '../../lib';
import {
  evaluateHealth,
  groupChecksFor,
  validateHealthThresholds,
  type PgQueueHealthInput,
  type PgQueueHealthThresholds,
} from '../../lib/health';
import type { QueueCounts } from '../../lib/core/job';

const NOW = 1_700_000_000_000;
const ZERO: QueueCounts = {
  waiting: 0,
  delayed: 0,
  active: 0,
  stalled: 0,
  failed: 0,
  waitingChildren: 0,
  sleeping: 0,
  waitingSignal: 0,
  oldestWaitingAgeMs: null,
};

function counts(c: Partial<QueueCounts> = {}): QueueCounts {
  return { ...ZERO, ...c };
}

/** A healthy process: listener connected, workers running, no queue figures unless given. */
function input(over: Partial<PgQueueHealthInput> = {}): PgQueueHealthInput {
  return {
    counts: {},
    listener: { connected: true, disconnectedSince: null },
    workersExpected: true,
    workersRunning: true,
    now: NOW,
    ...over,
  };
}

describe('evaluateHealth', () => {
  it('is up with no problems, and reports each queue by name in the threshold vocabulary', () => {
    const r = evaluateHealth(
      input({
        counts: {
          orders: counts({ waiting: 3, delayed: 2, active: 1, failed: 4, oldestWaitingAgeMs: 120 }),
          email: counts(),
        },
      }),
    );
    expect(r.up).toBe(true);
    expect(r.problems).toEqual([]);
    expect(r.details).toEqual({
      queues: {
        email: {
          available: 0,
          oldestAvailableAgeMs: null,
          delayed: 0,
          active: 0,
          stalled: 0,
          failed: 0,
          waitingChildren: 0,
          sleeping: 0,
          waitingSignal: 0,
        },
        orders: {
          available: 3,
          oldestAvailableAgeMs: 120,
          delayed: 2,
          active: 1,
          stalled: 0,
          failed: 4,
          waitingChildren: 0,
          sleeping: 0,
          waitingSignal: 0,
        },
      },
      listener: 'connected',
      workers: 'running',
      problems: [],
    });
    expect(Object.keys(r.details.queues)).toEqual(['email', 'orders']);
  });

  it('checks nothing about queues without thresholds, however large the figures', () => {
    const big = counts({ waiting: 1e9, stalled: 1e6, failed: 1e6, oldestWaitingAgeMs: 1e12 });
    expect(evaluateHealth(input({ counts: { q: big } })).up).toBe(true);
  });

  describe.each([
    ['maxAvailable', { waiting: 101 }, { waiting: 100 }, 'queue "email": 101 available > maxAvailable 100'],
    [
      'maxOldestAvailableAgeMs',
      { waiting: 1, oldestWaitingAgeMs: 101 },
      { waiting: 1, oldestWaitingAgeMs: 100 },
      'queue "email": oldest available job waiting 101 ms > maxOldestAvailableAgeMs 100',
    ],
    ['maxFailed', { failed: 101 }, { failed: 100 }, 'queue "email": 101 failed > maxFailed 100'],
    [
      'maxStalled',
      { stalled: 101, active: 101 },
      { stalled: 100, active: 100 },
      'queue "email": 101 stalled (active past their lease) > maxStalled 100',
    ],
  ] as const)('%s', (key, over, atLimit, problem) => {
    it('overall: down above the limit, with a sentence that names the queue, figure and limit', () => {
      const r = evaluateHealth(input({ counts: { email: counts(over), orders: counts() } }), { [key]: 100 });
      expect(r.up).toBe(false);
      expect(r.problems).toEqual([problem]);
      expect(r.details.problems).toEqual([problem]);
    });

    it('overall: up at the limit exactly (the limit is the most allowed)', () => {
      expect(evaluateHealth(input({ counts: { email: counts(atLimit) } }), { [key]: 100 }).up).toBe(true);
    });

    it('applies to each queue, not to the sum across queues', () => {
      const r = evaluateHealth(input({ counts: { a: counts(atLimit), b: counts(atLimit), c: counts(atLimit) } }), { [key]: 100 });
      expect(r.up).toBe(true);
    });

    it("per queue: the queue's own limit overrides the overall one, in both directions", () => {
      const t: PgQueueHealthThresholds = { [key]: 100, queues: { email: { [key]: 1000 }, orders: { [key]: 10 } } };
      const r = evaluateHealth(input({ counts: { email: counts(over), orders: counts(over), other: counts(over) } }), t);
      expect(r.up).toBe(false);
      // email is allowed 1000; orders is held to 10 (and the problem quotes that limit); other gets the overall 100.
      expect(r.problems).toEqual([
        problem.replace('"email"', '"orders"').replace(`${key} 100`, `queues["orders"].${key} 10`),
        problem.replace('"email"', '"other"'),
      ]);
    });

    it('per queue without an overall limit: only that queue is checked', () => {
      const r = evaluateHealth(input({ counts: { email: counts(over), orders: counts(over) } }), {
        queues: { email: { [key]: 100 } },
      });
      expect(r.problems).toEqual([problem.replace(`${key} 100`, `queues["email"].${key} 100`)]);
    });

    it('Infinity lifts the overall limit for one queue', () => {
      const r = evaluateHealth(input({ counts: { email: counts(over) } }), {
        [key]: 100,
        queues: { email: { [key]: Infinity } },
      });
      expect(r.up).toBe(true);
    });
  });

  it('a per-queue entry overrides only the limits it names; the other overall limits still apply to that queue', () => {
    const r = evaluateHealth(input({ counts: { email: counts({ waiting: 500, stalled: 1 }) } }), {
      maxAvailable: 100,
      maxStalled: 0,
      queues: { email: { maxAvailable: 1000 } },
    });
    expect(r.problems).toEqual(['queue "email": 1 stalled (active past their lease) > maxStalled 0']);
  });

  it('ignores maxOldestAvailableAgeMs when nothing is available (age null)', () => {
    expect(evaluateHealth(input({ counts: { q: counts({ delayed: 5 }) } }), { maxOldestAvailableAgeMs: 0 }).up).toBe(true);
  });

  it('does not take a queue named like an Object.prototype member for a per-queue entry', () => {
    const r = evaluateHealth(input({ counts: { constructor: counts({ waiting: 2 }) } }), { maxAvailable: 1, queues: {} });
    expect(r.problems).toEqual(['queue "constructor": 2 available > maxAvailable 1']);
  });

  it('lists every problem, queues in name order, then listener, then workers', () => {
    const r = evaluateHealth(
      input({
        counts: { b: counts({ waiting: 5, failed: 1 }), a: counts({ waiting: 5 }) },
        listener: { connected: false, disconnectedSince: NOW - 60_000 },
        workersRunning: false,
      }),
      { maxAvailable: 1, maxFailed: 0 },
    );
    expect(r.problems).toEqual([
      'queue "a": 5 available > maxAvailable 1',
      'queue "b": 5 available > maxAvailable 1',
      'queue "b": 1 failed > maxFailed 0',
      'listener: LISTEN connection down for 60000 ms > listenerGraceMs 30000 (workers fall back to polling)',
      'workers: not running in this process (not started yet, or shutting down)',
    ]);
  });

  describe('listener', () => {
    const down = (sinceMsAgo: number) => ({ connected: false, disconnectedSince: NOW - sinceMsAgo });

    it('within the default grace (30 s): up, and the details say for how long it is down', () => {
      const r = evaluateHealth(input({ listener: down(30_000) }));
      expect(r.up).toBe(true);
      expect(r.details.listener).toBe('disconnected for 30000 ms');
    });

    it('beyond the default grace: down', () => {
      const r = evaluateHealth(input({ listener: down(30_001) }));
      expect(r.up).toBe(false);
      expect(r.problems).toEqual([
        'listener: LISTEN connection down for 30001 ms > listenerGraceMs 30000 (workers fall back to polling)',
      ]);
    });

    it('an app of several connections: the details and the problem name the connection whose listener is down', () => {
      const r = evaluateHealth(input({ listener: { ...down(30_001), connection: 'bulk' } }));
      expect(r.up).toBe(false);
      expect(r.details.listener).toBe('disconnected for 30001 ms (connection "bulk")');
      expect(r.problems).toEqual([
        'listener of connection "bulk": LISTEN connection down for 30001 ms > listenerGraceMs 30000 (workers fall back to polling)',
      ]);
      expect(
        evaluateHealth(input({ listener: { connected: true, disconnectedSince: null, connection: 'bulk' } })).details.listener,
      ).toBe('connected');
    });

    it('listenerGraceMs sets the grace', () => {
      expect(evaluateHealth(input({ listener: down(400) }), { listenerGraceMs: 500 }).up).toBe(true);
      expect(evaluateHealth(input({ listener: down(600) }), { listenerGraceMs: 500 }).up).toBe(false);
      expect(evaluateHealth(input({ listener: down(1) }), { listenerGraceMs: 0 }).up).toBe(false);
      expect(evaluateHealth(input({ listener: down(1e9) }), { listenerGraceMs: Infinity }).up).toBe(true);
    });

    it('disconnected since an unknown time counts from now (within grace)', () => {
      const r = evaluateHealth(input({ listener: { connected: false, disconnectedSince: null } }), { listenerGraceMs: 0 });
      expect(r.up).toBe(true);
      expect(r.details.listener).toBe('disconnected for 0 ms');
    });

    it('poll-only (no listener): ignored, reported as poll-only', () => {
      const r = evaluateHealth(input({ listener: null }), { listenerGraceMs: 0 });
      expect(r.up).toBe(true);
      expect(r.details.listener).toBe('poll-only');
    });

    it('no workers here: no listener either, reported as not used', () => {
      const r = evaluateHealth(input({ listener: null, workersExpected: false, workersRunning: false }));
      expect(r.up).toBe(true);
      expect(r.details).toMatchObject({ listener: 'not used', workers: 'disabled' });
    });
  });

  describe('workers', () => {
    it('expected but stopped: down', () => {
      const r = evaluateHealth(input({ workersRunning: false }));
      expect(r.up).toBe(false);
      expect(r.details.workers).toBe('stopped');
      expect(r.problems).toEqual(['workers: not running in this process (not started yet, or shutting down)']);
    });

    it('disabled (workers: false, a producer-only process): up', () => {
      const r = evaluateHealth(input({ workersExpected: false, workersRunning: false }));
      expect(r.up).toBe(true);
      expect(r.details.workers).toBe('disabled');
    });
  });
});

describe('validateHealthThresholds', () => {
  it.each<[string, unknown, RegExp]>([
    ['negative', { maxAvailable: -1 }, /maxAvailable must be a number >= 0 \(Infinity for no limit\), got -1/],
    ['NaN', { maxStalled: NaN }, /maxStalled must be a number >= 0.*got NaN/],
    ['a string', { maxFailed: '10' }, /maxFailed must be a number >= 0.*got "10"/],
    ['a negative grace', { listenerGraceMs: -5 }, /listenerGraceMs must be a number >= 0/],
    [
      'a per-queue negative',
      { queues: { email: { maxOldestAvailableAgeMs: -1 } } },
      /queues\["email"\]\.maxOldestAvailableAgeMs must be a number >= 0/,
    ],
    ['a per-queue non-object', { queues: { email: 5 } }, /queues\["email"\] must be an object/],
    ['queues not an object', { queues: 'email' }, /queues must be an object of per-queue limits/],
    ['a zero timeout', { timeoutMs: 0 }, /timeoutMs must be a whole number of ms from 1/],
    ['an infinite timeout', { timeoutMs: Infinity }, /timeoutMs must be a whole number of ms from 1/],
    ['a typo', { maxAvaliable: 5 }, /Unknown health threshold\(s\) maxAvaliable\. Known: maxAvailable, /],
    [
      'a per-queue typo',
      { queues: { email: { listenerGraceMs: 5 } } },
      /Unknown health threshold\(s\) in queues\["email"\]: listenerGraceMs\. Known: maxAvailable/,
    ],
    ['not an object', null, /must be an object like \{ maxAvailable: 1000 \}, got null/],
  ])('rejects %s with a PgQueueConfigError that says what to change', (_, t, message) => {
    expect(() => validateHealthThresholds(t as PgQueueHealthThresholds)).toThrow(PgQueueConfigError);
    expect(() => validateHealthThresholds(t as PgQueueHealthThresholds)).toThrow(message);
    expect(() => evaluateHealth(input(), t as PgQueueHealthThresholds)).toThrow(message);
  });

  it('accepts zero, Infinity and every documented key', () => {
    expect(() =>
      validateHealthThresholds({
        maxAvailable: 0,
        maxOldestAvailableAgeMs: Infinity,
        maxFailed: 0,
        maxStalled: 0,
        listenerGraceMs: 0,
        timeoutMs: 1,
        queues: { email: { maxAvailable: 0, maxOldestAvailableAgeMs: 1, maxFailed: 2, maxStalled: Infinity } },
      }),
    ).not.toThrow();
  });
});

describe('maxGroupWaitMs (issue 29: a group that waited too long)', () => {
  const g = (group: string, oldestWaitingAgeMs: number | null, waiting = 1, active = 0) => ({
    group,
    waiting,
    active,
    oldestWaitingAgeMs,
  });

  it('is down for each group past the limit, named in the problem and in its queue details; equal is fine', () => {
    const r = evaluateHealth(
      input({
        counts: { imports: counts({ waiting: 900, active: 4, oldestWaitingAgeMs: 90_000 }) },
        groups: { imports: [g('tenant-7', 90_000, 3), g('tenant-9', 60_001, 2, 1), g('tenant-0', 60_000, 890, 3)] },
      }),
      { maxGroupWaitMs: 60_000 },
    );
    expect(r.up).toBe(false);
    expect(r.problems).toEqual([
      'queue "imports" group "tenant-7": oldest available job waiting 90000 ms > maxGroupWaitMs 60000',
      'queue "imports" group "tenant-9": oldest available job waiting 60001 ms > maxGroupWaitMs 60000',
    ]);
    expect(r.details.queues.imports.groups).toEqual({
      'tenant-7': { available: 3, active: 0, oldestAvailableAgeMs: 90_000 },
      'tenant-9': { available: 2, active: 1, oldestAvailableAgeMs: 60_001 },
    });
  });

  it('is up when every group is within the limit, or none waits; no groups key in the details then', () => {
    const r = evaluateHealth(
      input({
        counts: { imports: counts({ waiting: 2, oldestWaitingAgeMs: 100 }) },
        groups: { imports: [g('a', 100), g('b', null, 0, 2)] },
      }),
      { maxGroupWaitMs: 100 },
    );
    expect(r.up).toBe(true);
    expect(r.details.queues.imports).not.toHaveProperty('groups');
  });

  it('a queue entry overrides the overall limit, Infinity lifts it, and no limit checks nothing', () => {
    const snapshot = input({
      counts: { a: counts({ oldestWaitingAgeMs: 5000 }), b: counts({ oldestWaitingAgeMs: 5000 }) },
      groups: { a: [g('t', 5000)], b: [g('t', 5000)] },
    });
    expect(evaluateHealth(snapshot, { maxGroupWaitMs: 1000, queues: { b: { maxGroupWaitMs: Infinity } } }).problems).toEqual([
      'queue "a" group "t": oldest available job waiting 5000 ms > maxGroupWaitMs 1000',
    ]);
    expect(evaluateHealth(snapshot, { queues: { b: { maxGroupWaitMs: 4999 } } }).problems).toEqual([
      'queue "b" group "t": oldest available job waiting 5000 ms > queues["b"].maxGroupWaitMs 4999',
    ]);
    expect(evaluateHealth(snapshot).up).toBe(true);
  });

  it('groupChecksFor reads only queues with a limit whose own oldest available job is past it', () => {
    const c = {
      fresh: counts({ oldestWaitingAgeMs: 10 }),
      old: counts({ oldestWaitingAgeMs: 10_000 }),
      empty: counts(),
      lifted: counts({ oldestWaitingAgeMs: 10_000 }),
    };
    expect(groupChecksFor(c, { maxGroupWaitMs: 1000, queues: { lifted: { maxGroupWaitMs: Infinity } } })).toEqual([
      { queue: 'old', maxGroupWaitMs: 1000 },
    ]);
    expect(groupChecksFor(c, {})).toEqual([]);
    expect(groupChecksFor(c, { queues: { fresh: { maxGroupWaitMs: 5 } } })).toEqual([{ queue: 'fresh', maxGroupWaitMs: 5 }]);
  });

  it('rejects a bad maxGroupWaitMs, overall or per queue, saying what to change', () => {
    expect(() => validateHealthThresholds({ maxGroupWaitMs: -1 })).toThrow(/maxGroupWaitMs must be a number >= 0/);
    expect(() => validateHealthThresholds({ queues: { a: { maxGroupWaitMs: NaN } } })).toThrow(
      /queues\["a"\]\.maxGroupWaitMs must be a number >= 0/,
    );
  });
});
