// Smoke test: the CommonJS build of nestjs-pg-queue inside an ES-module NestJS 12 app
// (@nestjs/typeorm 12, TypeORM 1.x), while the root (and jest) stays on NestJS 11.
//
//   npm run build && PGQUEUE_TEST_URL=postgres://... node test/esm/nest12/run.mjs
//
// Run by scripts/test.mjs after jest. PGQUEUE_TEST_URL is an admin URL: a database is created
// from it and dropped at the end. Steps:
//   1. copies the built package (package.json, dist/, migrations/) into
//      ./node_modules/nestjs-pg-queue, so its require()s resolve this workspace's NestJS 12;
//   2. boots app.mjs (TypeOrmModule.forRoot + PgQueueModule.forRoot({}) without a connection);
//   3. enqueues one job in a committed transaction and one in a rolled-back one.
// Exits non-zero when any check fails.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createDatabase, dropDatabase, redactUrl } from '../../../scripts/pg-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..', '..');
const installed = path.join(here, 'node_modules', 'nestjs-pg-queue');
const DEADLINE_MS = 20_000; // per wait
const WATCHDOG_MS = 120_000; // whole run

const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push([name, null]);
    console.log(`  ok   ${name}`);
  } catch (err) {
    results.push([name, err]);
    console.log(`  FAIL ${name}\n${indent(err?.stack ?? String(err))}`);
    if (err?.cause) console.log(indent(`cause: ${err.cause?.stack ?? err.cause}`));
  }
}
const indent = (s) => String(s).replace(/^/gm, '       ');

/** Polls `fn` until it returns a truthy value or the deadline passes. */
async function waitFor(what, fn, { timeoutMs = DEADLINE_MS, everyMs = 50 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

const majorOf = (pkgJsonPath) => Number(JSON.parse(fs.readFileSync(pkgJsonPath, 'utf8')).version.split('.')[0]);

/** The package.json of the package `entry` (a resolved file) belongs to. */
function packageJsonOf(entry, name) {
  const marker = `${path.sep}node_modules${path.sep}${name.split('/').join(path.sep)}${path.sep}`;
  const i = entry.lastIndexOf(marker);
  assert.ok(i >= 0, `${entry} is not inside a node_modules/${name} directory`);
  return entry.slice(0, i + marker.length) + 'package.json';
}

/** Fresh copy of the built package where this workspace's node_modules resolve its imports. */
function installBuiltPackage() {
  const dist = path.join(root, 'dist');
  if (!fs.existsSync(path.join(dist, 'index.js'))) {
    throw new Error(`${path.relative(root, dist)}/index.js is missing: run \`npm run build\` first (npm test does).`);
  }
  const distTime = fs.statSync(path.join(dist, 'index.js')).mtimeMs;
  const lib = path.join(root, 'lib');
  const newer = (fs.existsSync(lib) ? fs.readdirSync(lib, { recursive: true }) : [])
    .map(String)
    .filter((f) => f.endsWith('.ts') && fs.statSync(path.join(lib, f)).mtimeMs > distTime);
  if (newer.length) {
    console.warn(
      `  warning: lib/ has ${newer.length} file(s) newer than dist/index.js (${newer.slice(0, 3).join(', ')}...); testing the existing build`,
    );
  }
  fs.rmSync(installed, { recursive: true, force: true });
  fs.mkdirSync(installed, { recursive: true });
  fs.copyFileSync(path.join(root, 'package.json'), path.join(installed, 'package.json'));
  fs.cpSync(dist, path.join(installed, 'dist'), { recursive: true });
  fs.cpSync(path.join(root, 'migrations'), path.join(installed, 'migrations'), { recursive: true });
}

async function main() {
  const adminUrl = process.env.PGQUEUE_TEST_URL;
  if (!adminUrl) throw new Error('PGQUEUE_TEST_URL is not set (an admin postgres URL; scripts/test.mjs sets it)');

  installBuiltPackage();
  // require() as the copied package's own code does it.
  const pkgRequire = createRequire(path.join(installed, 'dist', 'index.js'));

  // Inside the runner's prefix, so a crashed run is cleaned up by scripts/test.mjs.
  const runId = process.env.PGQUEUE_TEST_RUN_ID;
  const dbName = runId ? `pgq_t_${runId}_esm_nest12` : `pgq_esm_nest12_${randomBytes(3).toString('hex')}`;
  const url = await createDatabase(adminUrl, dbName);
  console.log(`esm nest12 smoke: database ${redactUrl(url)}`);

  let app;
  try {
    const { NestFactory } = await import('@nestjs/core');
    const { DataSource } = await import('typeorm');
    const { QueueService } = await import('nestjs-pg-queue');
    const { createAppModule, MailProcessor, SignupService } = await import(pathToFileURL(path.join(here, 'app.mjs')).href);

    await check('the CJS build resolves and shares NestJS 12 (and TypeORM 1.x) with the ESM app', async () => {
      const { default: commonPkg } = await import('@nestjs/common/package.json', { with: { type: 'json' } });
      const { default: corePkg } = await import('@nestjs/core/package.json', { with: { type: 'json' } });
      assert.equal(commonPkg.version.split('.')[0], '12', `app imports @nestjs/common ${commonPkg.version}`);
      assert.equal(corePkg.version.split('.')[0], '12', `app imports @nestjs/core ${corePkg.version}`);

      const expected = { '@nestjs/common': 12, '@nestjs/core': 12, typeorm: 1 };
      for (const [name, major] of Object.entries(expected)) {
        const resolved = pkgRequire.resolve(name);
        assert.ok(
          resolved.startsWith(path.join(here, 'node_modules') + path.sep),
          `${name} resolves to ${resolved}, outside this workspace`,
        );
        assert.equal(majorOf(packageJsonOf(resolved, name)), major, `${name} as seen from the package: ${resolved}`);
      }
      // The same module instances, not copies: require(esm) shares the ESM loader's cache.
      assert.equal(pkgRequire('@nestjs/common').Module, (await import('@nestjs/common')).Module, '@nestjs/common loaded twice');
      assert.equal(pkgRequire('@nestjs/core').NestFactory, NestFactory, '@nestjs/core loaded twice');
      assert.equal(
        pkgRequire('typeorm').DataSource,
        DataSource,
        'typeorm DataSource: require() and import give different classes',
      );
      // The package we import is the copy, and nothing from the root's NestJS 11 / TypeORM 0.3 got in.
      assert.equal(pkgRequire.resolve('nestjs-pg-queue'), path.join(installed, 'dist', 'index.js'));
      const rootNm = path.join(root, 'node_modules') + path.sep;
      const leaked = Object.keys(createRequire(import.meta.url).cache).filter(
        (f) => f.startsWith(rootNm + '@nestjs' + path.sep) || f.startsWith(rootNm + 'typeorm' + path.sep),
      );
      assert.deepEqual(leaked.slice(0, 5), [], 'modules of the root NestJS 11 / TypeORM 0.3 were loaded');
    });

    await check('boots with PgQueueModule.forRoot({}) on the default TypeORM DataSource found through DI', async () => {
      app = await NestFactory.createApplicationContext(createAppModule(url), {
        logger: process.env.PGQUEUE_TEST_LOGS ? undefined : ['error', 'warn'],
        abortOnError: false,
      });
      const dataSource = app.get(DataSource);
      assert.ok(dataSource instanceof DataSource && dataSource.isInitialized, 'the app has an initialised DataSource');
      // The queue migrated and counts in the DataSource's own database.
      const [{ n }] = await dataSource.query(`SELECT count(*)::int AS n FROM pgqueue.migrations`);
      assert.ok(n > 0, "the queue's schema is in the DataSource's database");
      assert.deepEqual(Object.keys(await app.get(QueueService).getCounts()), ['mail']);
      assert.ok(app.get(MailProcessor) instanceof MailProcessor);
    });

    await check('transactional enqueue: the committed job completes, the rolled-back one never exists', async () => {
      assert.ok(app, 'the app did not boot');
      const signups = app.get(SignupService);
      const queues = app.get(QueueService);
      const mail = app.get(MailProcessor);

      const rolledBack = await signups.signUp('rolled-back@example.com', { rollback: true });
      assert.ok(rolledBack?.id, 'the insert inside the rolled-back transaction returned a job');
      const committed = await signups.signUp('committed@example.com');
      assert.equal(committed.queue, 'mail');

      const done = await waitFor(`job ${committed.id} to complete`, async () => {
        const job = await queues.getJob(committed.id);
        if (job?.state === 'failed') throw new Error(`job ${committed.id} failed: ${JSON.stringify(job.errors)}`);
        return job?.state === 'completed' ? job : null;
      });
      assert.deepEqual(done.result, { sentTo: 'committed@example.com' });
      assert.deepEqual(done.payload, { email: 'committed@example.com' });
      // The rolled-back job was enqueued first: had it been visible, the worker would have run it already.
      assert.equal(await queues.getJob(rolledBack.id), null, `rolled-back job ${rolledBack.id} exists`);
      assert.deepEqual(
        mail.seen.map((j) => j.payload.email),
        ['committed@example.com'],
        'the processor ran exactly the committed job',
      );
      const { count } = (
        await app.get(DataSource).query(
          `SELECT (SELECT count(*) FROM pgqueue.jobs WHERE payload->>'email' = $1)
                + (SELECT count(*) FROM pgqueue.job_history WHERE payload->>'email' = $1) AS count`,
          ['rolled-back@example.com'],
        )
      )[0];
      assert.equal(Number(count), 0, 'rows of the rolled-back job in pgqueue.jobs / job_history');
    });
  } finally {
    if (app) {
      await app.close().catch((err) => {
        results.push(['app.close()', err]);
        console.log(`  FAIL app.close()\n${indent(err?.stack ?? err)}`);
      });
    }
    await dropDatabase(adminUrl, dbName);
    fs.rmSync(installed, { recursive: true, force: true }); // not an npm-managed package: keep `npm ls` clean
  }
}

// Last resort against a hang (the database is then left to scripts/test.mjs' cleanup).
setTimeout(() => {
  console.error(`esm nest12 smoke: still running after ${WATCHDOG_MS} ms; giving up`);
  process.exit(1);
}, WATCHDOG_MS).unref();

let code = 1;
try {
  await main();
  const failed = results.filter(([, err]) => err).length;
  console.log(`esm nest12 smoke: ${results.length - failed} passed, ${failed} failed`);
  code = failed === 0 && results.length > 0 ? 0 : 1;
} catch (err) {
  console.error('esm nest12 smoke: error:', err?.stack ?? err);
  code = 1;
}
process.exit(code);
