import { PgQueueConfigError } from '../../lib';
import { validateQueueName, validateSchemaName } from '../../lib/core/names';
import { DEFAULTS } from '../../lib/core/options/defaults';
import { resolveModuleOptions, resolveQueueOptions } from '../../lib/core/options/module-checks';

describe('module options', () => {
  it('fills every default', () => {
    const o = resolveModuleOptions({});
    expect(o).toMatchObject({
      schema: 'pgqueue',
      migrate: true,
      listen: true,
      pollIntervalMs: DEFAULTS.pollIntervalMs,
      leaseMs: 30_000,
      heartbeatIntervalMs: 10_000,
      defaultJobOptions: { attempts: 3, priority: 0, backoff: { type: 'exponential', delayMs: 1000, jitter: true } },
    });
  });

  it('keeps explicit zeros and falsy values (no `||` defaults)', () => {
    const o = resolveModuleOptions({ shutdownTimeoutMs: 0, listen: false, migrate: false, retention: { completedMs: 0 } });
    expect(o.shutdownTimeoutMs).toBe(0);
    expect(o.listen).toBe(false);
    expect(o.migrate).toBe(false);
    expect(o.retention.completedMs).toBe(0);
  });

  it('layers queue defaults over module defaults', () => {
    const base = resolveModuleOptions({
      defaultJobOptions: { attempts: 5, backoff: { type: 'fixed', delayMs: 10 } },
    }).defaultJobOptions;
    const q = resolveQueueOptions({ name: 'email', defaultJobOptions: { priority: 3 } }, base);
    expect(q.defaultJobOptions).toEqual({
      priority: 3,
      attempts: 5,
      backoff: { type: 'fixed', delayMs: 10, maxDelayMs: 3_600_000, jitter: false },
      timeoutMs: null,
      groupOf: null,
    });
    expect(q.concurrency).toBe(10);
  });

  it("takes a queue's defaultJobOptions.group as a function of the payload only; the module's refuses it", () => {
    const base = resolveModuleOptions({}).defaultJobOptions;
    const group = (p: { tenant: string }) => p.tenant;
    const q = resolveQueueOptions({ name: 'imports', defaultJobOptions: { priority: 2, group } }, base);
    expect(q.defaultJobOptions).toMatchObject({ priority: 2, groupOf: group });
    expect(() => resolveQueueOptions({ name: 'imports', defaultJobOptions: { group: 'tenant-1' as never } }, base)).toThrow(
      /queue "imports" defaultJobOptions.group: "tenant-1". A default group is a function of the payload/,
    );
    expect(() => resolveModuleOptions({ defaultJobOptions: { group } as never })).toThrow(
      /registerQueue\(\{ defaultJobOptions: \{ group \} \}\)/,
    );
  });

  it('layers a partial backoff over the one below it field by field; jitter follows only a backoff of the same type', () => {
    const base = resolveModuleOptions({
      defaultJobOptions: { backoff: { type: 'fixed', delayMs: 10, maxDelayMs: 500, jitter: false } },
    }).defaultJobOptions;
    const q = resolveQueueOptions({ name: 'email', defaultJobOptions: { backoff: { type: 'exponential', delayMs: 20 } } }, base);
    // Another type: its own default jitter (on for exponential), the delays from below.
    expect(q.defaultJobOptions.backoff).toEqual({ type: 'exponential', delayMs: 20, maxDelayMs: 500, jitter: true });
    const same = resolveQueueOptions({ name: 'email', defaultJobOptions: { backoff: { type: 'fixed', delayMs: 20 } } }, base);
    expect(same.defaultJobOptions.backoff).toEqual({ type: 'fixed', delayMs: 20, maxDelayMs: 500, jitter: false });
  });

  it('accepts retention of a month or more (a bigint in SQL, not a timer)', () => {
    const month = 30 * 86_400_000;
    expect(
      resolveModuleOptions({ retention: { completedMs: month, cancelledMs: month, failedMs: 10 * 365 * 86_400_000 } }).retention,
    ).toEqual({
      completedMs: month,
      cancelledMs: month,
      failedMs: 10 * 365 * 86_400_000,
    });
  });

  it.each<[string, object, RegExp]>([
    ['an unknown job option, naming the bullmq one', { defaultJobOptions: { delay: 5 } }, /"delay" \(use delayMs/],
    ['a per-job option', { defaultJobOptions: { runAt: new Date() } }, /"runAt" \(use it per job, in add\(\)/],
    ['a uniqueKey default', { defaultJobOptions: { uniqueKey: 'k' } }, /"uniqueKey" \(use it per job/],
    ['an unknown retention key', { retention: { completed: 1 } }, /Unknown option\(s\) in retention: "completed"/],
    ['a retention that is not an object', { retention: 5 }, /Invalid retention: 5/],
    ['a key in other casing', { pollintervalms: 5 }, /"pollintervalms" \(use pollIntervalMs\)/],
    [
      'a long bad value, quoted briefly',
      { leaseMs: 'l'.repeat(10_000) },
      /^Invalid leaseMs: "l{60}"… \(10000 characters\) \(it is a string, not a number\)/,
    ],
  ])('refuses %s', (_what, options, message) => {
    expect(() => resolveModuleOptions(options as never)).toThrow(PgQueueConfigError);
    expect(() => resolveModuleOptions(options as never)).toThrow(message);
  });

  it.each(['pgqueue', 'tenant_a', '_x'])('accepts schema %s', (s) => expect(validateSchemaName(s)).toBe(s));
  it.each(['', 'Upper', '1abc', 'a-b', 'a"b', 'x'.repeat(49), 'pg queue'])('rejects schema %j', (s) =>
    expect(() => validateSchemaName(s)).toThrow(PgQueueConfigError),
  );
  it.each(['email', 'a.b:c-d_e', 'X1'])('accepts queue %s', (q) => expect(validateQueueName(q)).toBe(q));
  it.each(['', '-lead', 'has space', 'pipe|char', 'x'.repeat(101)])('rejects queue %j', (q) =>
    expect(() => validateQueueName(q)).toThrow(PgQueueConfigError),
  );
});
