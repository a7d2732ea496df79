import { PgQueueConfigError } from '../../lib';
import { DEFAULTS, resolveModuleOptions, resolveQueueOptions, validateQueueName, validateSchemaName } from '../../lib/core/pg-queue.options';

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
    const base = resolveModuleOptions({ defaultJobOptions: { attempts: 5, backoff: { type: 'fixed', delayMs: 10 } } }).defaultJobOptions;
    const q = resolveQueueOptions({ name: 'email', defaultJobOptions: { priority: 3 } }, base);
    expect(q.defaultJobOptions).toEqual({
      priority: 3,
      attempts: 5,
      backoff: { type: 'fixed', delayMs: 10, maxDelayMs: 3_600_000, jitter: false },
      timeoutMs: null,
    });
    expect(q.concurrency).toBe(10);
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
