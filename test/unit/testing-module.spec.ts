import { PgQueueConfigError } from '../../lib';
import { PgQueueTestingModule } from '../../lib/testing';
import { PG_QUEUE_TESTING } from '../../lib/module/pg-queue.constants';

describe('PgQueueTestingModule.forRoot options', () => {
  it('provides the test mode, with a 1000 ms shutdown grace period by default', () => {
    const mod = PgQueueTestingModule.forRoot();
    expect(mod.global).toBe(true);
    expect(mod.providers).toContainEqual({ provide: PG_QUEUE_TESTING, useValue: { shutdownTimeoutMs: 1000 } });
    expect(PgQueueTestingModule.forRoot({ shutdownTimeoutMs: 0 }).providers).toContainEqual({
      provide: PG_QUEUE_TESTING,
      useValue: { shutdownTimeoutMs: 0 },
    });
  });

  it.each([-1, 1.5, Number.NaN, '100' as unknown as number])('refuses shutdownTimeoutMs %p, saying what it takes', (bad) => {
    expect(() => PgQueueTestingModule.forRoot({ shutdownTimeoutMs: bad })).toThrow(PgQueueConfigError);
    expect(() => PgQueueTestingModule.forRoot({ shutdownTimeoutMs: bad })).toThrow(/whole number of milliseconds >= 0/);
  });
});
