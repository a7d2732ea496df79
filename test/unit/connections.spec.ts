import { PgQueueConfigError } from '../../lib';
import { planConnections } from '../../lib/core/connections';
import { DEFAULTS } from '../../lib/core/options/defaults';
import { resolveQueueOptions } from '../../lib/core/options/module-checks';

// forRoot({ connections }): validated at boot, split into one plan per database.

describe('named connections', () => {
  it('the single-connection form is one default plan, unchanged', () => {
    const plans = planConnections({ connection: 'postgres://a/app', schema: 'jobs' });
    expect(plans.map((p) => p.name)).toEqual(['default']);
    expect(plans[0].raw).toEqual({ connection: 'postgres://a/app', schema: 'jobs' });
    expect(plans[0].options.schema).toBe('jobs');
  });

  it('entries inherit the top-level settings, never where the top-level database is', () => {
    const plans = planConnections({
      connection: 'postgres://a/app',
      listenConnection: 'postgres://a-direct/app',
      schema: 'jobs',
      poolSize: 6,
      pollIntervalMs: 300,
      connections: { bulk: { connection: 'postgres://b/bulk', poolSize: 12 } },
    });
    expect(plans.map((p) => p.name)).toEqual(['default', 'bulk']);
    const bulk = plans[1];
    expect(bulk.raw.connection).toBe('postgres://b/bulk');
    expect(bulk.raw.listenConnection).toBeUndefined();
    expect(bulk.options).toMatchObject({ schema: 'jobs', poolSize: 12, pollIntervalMs: 300, handleUnhandledRejections: false });
    expect(plans[0].options).toMatchObject({ poolSize: 6, handleUnhandledRejections: true });
  });

  it('connections.default replaces the top-level connection; giving both is refused', () => {
    const plans = planConnections({ connections: { default: { connection: 'postgres://a/app' }, bulk: { dataSource: 'BULK' } } });
    expect(plans.map((p) => [p.name, p.raw.connection ?? p.raw.dataSource])).toEqual([
      ['default', 'postgres://a/app'],
      ['bulk', 'BULK'],
    ]);
    expect(() =>
      planConnections({ connection: 'postgres://a/app', connections: { default: { connection: 'postgres://b/app' } } }),
    ).toThrow(/The default database is given twice: as connections.default and as the top-level connection/);
  });

  it('refuses an entry that does not say where its database is, unknown keys, bad names and values', () => {
    expect(() => planConnections({ connections: { bulk: { schema: 'x' } } })).toThrow(
      /connections.bulk does not say where its database is: give it connection/,
    );
    expect(() => planConnections({ connections: { bulk: { connection: 'postgres://b', workers: false } as never } })).toThrow(
      /Unknown option\(s\) in connections.bulk: "workers"/,
    );
    expect(() => planConnections({ connections: { 'no way': { connection: 'postgres://b' } } })).toThrow(
      /Invalid connections key "no way"/,
    );
    expect(() => planConnections({ connections: { bulk: { connection: 'postgres://b', poolSize: 0 } } })).toThrow(
      PgQueueConfigError,
    );
    expect(() => planConnections({ connections: 'postgres://b' as never })).toThrow(/Invalid connections/);
  });

  it('a queue names its connection (default: "default"), validated', () => {
    expect(resolveQueueOptions({ name: 'q' }, DEFAULTS.job).connection).toBe('default');
    expect(resolveQueueOptions({ name: 'q', connection: 'bulk' }, DEFAULTS.job).connection).toBe('bulk');
    expect(() => resolveQueueOptions({ name: 'q', connection: '' }, DEFAULTS.job)).toThrow(
      /Invalid registerQueue\(\{ name: "q" \}\) connection ""/,
    );
  });
});
