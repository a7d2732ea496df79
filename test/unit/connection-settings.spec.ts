import { Client } from 'pg';
import { PgQueueConfigError } from '../../lib';
import { fromDataSource, listenClientConfig, queuePoolConfig, resolveConnection } from '../../lib/db/connection';
import { connectTarget, isServerError } from '../../lib/db/connect-probe';
import { resolveModuleOptions } from '../../lib/core/options/module-checks';
import { planConnections } from '../../lib/core/connections';

// Issue 24, points 2 and 3: the connect timeout option, and what a reused TypeORM DataSource
// gives the queue's pool (what TypeORM's PostgresDriver.createPool gives pg, typeorm 0.3).

const ds = (options: Record<string, unknown>) => ({ options: { type: 'postgres', ...options } });

describe('fromDataSource: every connection setting TypeORM passes to pg', () => {
  it('the top-level credentials, connectTimeoutMS and applicationName', () => {
    expect(
      fromDataSource(
        ds({
          host: 'db',
          port: 5433,
          username: 'app',
          password: 'pw',
          database: 'shop',
          ssl: { rejectUnauthorized: false },
          connectTimeoutMS: 2500,
          applicationName: 'shop-api',
          poolSize: 30,
          schema: 'ignored_here',
        }),
      ),
    ).toEqual({
      host: 'db',
      port: 5433,
      user: 'app',
      password: 'pw',
      database: 'shop',
      ssl: { rejectUnauthorized: false },
      connectionTimeoutMillis: 2500,
      application_name: 'shop-api',
    });
  });

  it('replication: the master, never a replica nor the top-level host', () => {
    const master = { host: 'primary', port: 5432, username: 'w', password: 'pw', database: 'shop', applicationName: 'm' };
    const config = fromDataSource(ds({ host: 'ignored', replication: { master, slaves: [{ host: 'replica' }] } }));
    expect(config).toEqual({ host: 'primary', port: 5432, user: 'w', password: 'pw', database: 'shop', application_name: 'm' });
  });

  it("replication with a url master; the top-level applicationName wins over the master's", () => {
    const config = fromDataSource(
      ds({ applicationName: 'top', replication: { master: { url: 'postgres://p/shop', applicationName: 'm' }, slaves: [] } }),
    );
    expect(config).toEqual({ connectionString: 'postgres://p/shop', application_name: 'top' });
  });

  it('extra over everything (extra.ssl, extra.options, statement_timeout), except the pool size', () => {
    const config = fromDataSource(
      ds({
        url: 'postgres://db/shop',
        ssl: false,
        extra: { ssl: { ca: 'CA' }, options: '-c search_path=shop', statement_timeout: 5000, max: 50, keepAlive: true },
      }),
    );
    expect(config).toEqual({
      connectionString: 'postgres://db/shop',
      ssl: { ca: 'CA' },
      options: '-c search_path=shop',
      statement_timeout: 5000,
      keepAlive: true,
    });
  });

  it('refuses what it cannot carry over, saying what to pass instead', () => {
    expect(() => fromDataSource(ds({ driver: { Client: class {} } }))).toThrow(/sets `driver`.*forRoot\(\{ connection/);
    expect(() => fromDataSource(ds({ replication: { slaves: [] } }))).toThrow(/replication` without a `master`/);
    expect(() => fromDataSource(ds({ extra: 'x' }))).toThrow(PgQueueConfigError);
    expect(() => fromDataSource({ options: { type: 'mysql' } })).toThrow(/of type "mysql"/);
    // pg itself as the driver is what the queue uses anyway.
    expect(fromDataSource(ds({ driver: { Client }, host: 'db' }))).toEqual({ host: 'db' });
  });

  it("resolveConnection names the queue's sessions after the DataSource's, told apart from the app's", () => {
    const named = resolveConnection({}, ds({ host: 'db', applicationName: 'shop' }), 'bulk');
    expect([named.pool.application_name, named.listen.application_name]).toEqual([
      'shop:nestjs-pg-queue:bulk',
      'shop:nestjs-pg-queue:bulk:listen',
    ]);
    expect(resolveConnection({ connection: { application_name: 'mine' } }, undefined).pool.application_name).toBe('mine');
    const { pool, listen } = resolveConnection({}, ds({ host: 'db' }));
    expect([pool.application_name, listen.application_name]).toEqual(['nestjs-pg-queue', 'nestjs-pg-queue:listen']);
  });
});

describe('connectTimeoutMs', () => {
  it('defaults to 10 s, is validated like every duration, and a named connection may set its own', () => {
    expect(resolveModuleOptions({}).connectTimeoutMs).toBe(10_000);
    expect(resolveModuleOptions({ connectTimeoutMs: 300 }).connectTimeoutMs).toBe(300);
    expect(() => resolveModuleOptions({ connectTimeoutMs: 0 })).toThrow(/Invalid connectTimeoutMs: 0 \(it is below 100\)/);
    expect(() => resolveModuleOptions({ connectTimeoutMs: '5s' as never })).toThrow(PgQueueConfigError);
    expect(() => resolveModuleOptions({ connectTimeout: 5000 } as never)).toThrow(/"connectTimeout" \(use connectTimeoutMs/);
    const plans = planConnections({
      connection: 'postgres://a/x',
      connections: { bulk: { connection: 'postgres://b/y', connectTimeoutMs: 500 } },
    });
    expect(plans.map((p) => p.options.connectTimeoutMs)).toEqual([10_000, 500]);
  });

  it('goes to each client of the pool, not to the pool (whose wait for a free client it would cap)', () => {
    const config = queuePoolConfig({ host: 'db' }, { poolSize: 3, connectTimeoutMs: 700 });
    expect(config).toMatchObject({ host: 'db', max: 3 });
    expect(config.connectionTimeoutMillis).toBeUndefined();
    const client = new (config.Client as unknown as typeof Client)({ host: 'db' }) as unknown as {
      _connectionTimeoutMillis: number;
    };
    expect(client).toBeInstanceOf(Client);
    expect(client._connectionTimeoutMillis).toBe(700);
    expect(listenClientConfig({ host: 'db' }, 700).connectionTimeoutMillis).toBe(700);
  });

  it('keeps the password pg-pool hands each client non-enumerable (a spread dropped it: SCRAM servers refused)', () => {
    const config = queuePoolConfig({ host: 'db', user: 'u', password: 'pw' }, { poolSize: 3, connectTimeoutMs: 700 });
    // What pg-pool does to its options before it builds each client.
    const options: Record<string, unknown> = { ...config };
    Object.defineProperty(options, 'password', { enumerable: false, value: 'pw' });
    const client = new (config.Client as unknown as typeof Client)(options) as unknown as { password: string };
    expect(client.password).toBe('pw');
  });

  it("the connection's own timeout (pg's connectionTimeoutMillis, TypeORM's connectTimeoutMS) is kept", () => {
    const config = queuePoolConfig({ host: 'db', connectionTimeoutMillis: 2000 }, { poolSize: 3, connectTimeoutMs: 700 });
    expect(config.connectionTimeoutMillis).toBe(2000);
    expect(config.Client).toBeUndefined();
    expect(listenClientConfig({ connectionTimeoutMillis: 0 }, 700).connectionTimeoutMillis).toBe(0);
  });
});

describe('connectTarget: the host and port a failed boot names', () => {
  it('reads a connection string as pg does, else the fields, else the defaults', () => {
    expect(connectTarget({ connectionString: 'postgres://u:p@db.example:6379/x' })).toEqual({ host: 'db.example', port: 6379 });
    expect(connectTarget({ connectionString: 'postgresql://[::1]:5433/x' })).toEqual({ host: '::1', port: 5433 });
    expect(connectTarget({ connectionString: 'postgres:///x?host=/var/run/postgresql' })).toMatchObject({
      host: '/var/run/postgresql',
    });
    expect(connectTarget({ host: '127.0.0.1', port: 6379 })).toEqual({ host: '127.0.0.1', port: 6379 });
  });

  it('tells a server error (SQLSTATE and severity) from a connection that never reached one', () => {
    expect(isServerError(Object.assign(new Error('password authentication failed'), { code: '28P01', severity: 'FATAL' }))).toBe(
      true,
    );
    expect(isServerError(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))).toBe(false);
    expect(isServerError(new Error('timeout expired'))).toBe(false);
  });
});
