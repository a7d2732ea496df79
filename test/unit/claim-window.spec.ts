import { ClaimWindow } from '../../lib/worker/claim-window';
import { claimStatements, withClaimWindow } from '../../lib/db/claim';
import { schemaSql } from '../../lib/db/store-context';

// Which claim the worker sends (lib/worker/claim-window.ts): the window is on only after a full
// claim came back short, a full claim comes at least every fullEveryMs, and anything that says
// nothing about the rest of the queue turns the window off. The SQL side runs on PostgreSQL in
// test/integration/claim-window.int-spec.ts.
const opts = { enabled: true, fullEveryMs: 1000, marginMs: 5000 };

describe('ClaimWindow: when a claim may start past the head of the queue', () => {
  it('claims in full until a full claim comes back short, then within a window from its send time', () => {
    const w = new ClaimWindow(opts);
    expect(w.plan(0)).toEqual({ kind: 'full' });
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, [3, 0, 2]); // short: 3 of 10
    expect(w.plan(100)).toEqual({ kind: 'window', fromPriority: 0, windowMs: 5100 });
  });

  it('a full claim that came back full turns the window off (a backlog may lie anywhere)', () => {
    const w = new ClaimWindow(opts);
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, [0]);
    expect(w.plan(10).kind).toBe('window');
    w.sent({ kind: 'full' }, 1000);
    w.answered({ kind: 'full' }, 1000, 2, [0, 0]); // full: 2 of 2
    expect(w.plan(1001)).toEqual({ kind: 'full' });
  });

  it('a catch-up claim of what lies outside the window at least every fullEveryMs; a short window claim moves the window forward', () => {
    const w = new ClaimWindow(opts);
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, [1]);
    const plan = w.plan(400);
    expect(plan.kind).toBe('window');
    w.sent(plan, 400);
    w.answered(plan, 400, 10, []);
    expect(w.plan(500)).toEqual({ kind: 'window', fromPriority: 1, windowMs: 5100 });
    expect(w.fullDueInMs(500)).toBe(500);
    const catchUp = w.plan(1000);
    expect(catchUp).toEqual({ kind: 'outside', fromPriority: 1, windowMs: 5600 });
    w.sent(catchUp, 1000);
    expect(w.plan(1001).kind).toBe('window');
    w.answered(catchUp, 1000, 10, [0]); // short: the window stays, and now starts at priority 0
    expect(w.plan(1002)).toEqual({ kind: 'window', fromPriority: 0, windowMs: 5602 });
  });

  it('a catch-up claim that came back full turns the window off', () => {
    const w = new ClaimWindow(opts);
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, [0]);
    const catchUp = w.plan(1000);
    expect(catchUp.kind).toBe('outside');
    w.sent(catchUp, 1000);
    w.answered(catchUp, 1000, 1, [0]);
    expect(w.plan(1001)).toEqual({ kind: 'full' });
  });

  it('a window claim that came back full keeps the window where it was', () => {
    const w = new ClaimWindow(opts);
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, [0]);
    const plan = w.plan(300);
    w.sent(plan, 300);
    w.answered(plan, 300, 1, [0]);
    expect(w.plan(600)).toEqual({ kind: 'window', fromPriority: 0, windowMs: 5600 });
  });

  it('the window starts at the lowest priority claimed so far', () => {
    const w = new ClaimWindow(opts);
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, [5]);
    expect(w.plan(1)).toMatchObject({ fromPriority: 5 });
    w.sent({ kind: 'full' }, 2000);
    w.answered({ kind: 'full' }, 2000, 10, [-3, 7]);
    w.sent({ kind: 'full' }, 4000);
    w.answered({ kind: 'full' }, 4000, 10, [9]);
    expect(w.plan(4001)).toMatchObject({ fromPriority: -3 });
  });

  it('no window before any job was claimed, the catch-up after restart(), nothing but full claims when disabled', () => {
    const w = new ClaimWindow(opts);
    w.sent({ kind: 'full' }, 0);
    w.answered({ kind: 'full' }, 0, 10, []);
    expect(w.plan(1)).toEqual({ kind: 'full' }); // no priority known yet
    w.sent({ kind: 'full' }, 2);
    w.answered({ kind: 'full' }, 2, 10, [0]);
    expect(w.plan(3).kind).toBe('window');
    w.restart();
    const catchUp = w.plan(4);
    expect(catchUp.kind).toBe('outside');
    w.sent(catchUp, 4);
    w.answered(catchUp, 4, 10, []);
    expect(w.plan(5).kind).toBe('window');

    const off = new ClaimWindow({ ...opts, enabled: false });
    off.sent({ kind: 'full' }, 0);
    off.answered({ kind: 'full' }, 0, 10, [0]);
    expect(off.plan(1)).toEqual({ kind: 'full' });
    expect(off.fullDueInMs(1)).toBeNull();
  });
});

describe('claimSince and claimOutside: the claim with the window conditions added, or their complement', () => {
  it('are the claim with a row comparison and a run_at bound, or their negation, next to its due-time condition', () => {
    const q = claimStatements(schemaSql('pgqueue'));
    const since = q.claimSince;
    expect(
      q.claimOutside.replace(
        / AND \(priority < \$5::int OR run_at < now\(\) - \$6::bigint::float8 \* interval '1 millisecond'\)/,
        '',
      ),
    ).toBe(q.claim);
    expect(since).toContain(
      "AND run_at <= now() AND (priority, run_at) >= ($5::int, now() - $6::bigint::float8 * interval '1 millisecond')",
    );
    expect(
      since.replace(
        / AND \(priority, run_at\) >= .*? AND run_at >= now\(\) - \$6::bigint::float8 \* interval '1 millisecond'/,
        '',
      ),
    ).toBe(q.claim);
  });

  it('refuses a claim without the condition it anchors on', () => {
    expect(() => withClaimWindow('UPDATE jobs SET x = 1', 'inside')).toThrow(/must contain 'AND run_at <= now\(\)' exactly once/);
  });
});
