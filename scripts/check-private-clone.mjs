// Checks that both README commands work in a fresh clone under a private directory:
//
//   node scripts/check-private-clone.mjs
//
// As root (every container, many CI runners) the embedded PostgreSQL runs as the OS user
// `postgres`, which cannot traverse a mode-700 directory (a root user's home): its binaries in
// node_modules/ and the sample's .data/ are out of its reach (scripts/pg-native.mjs copes). So:
//
// 1. `git clone` the current commit (HEAD: uncommitted changes are not in it) into
//    <mode-700 dir>/<mode-700 dir>/repo, and `npm ci --offline` there (from the npm cache, which
//    the `npm ci` of this clone filled: no network);
// 2. `npm test -- <every test file that starts an embedded server of its own>` must pass: the
//    harness's server (scripts/pg-server.mjs) and each of those (startTestPostgres through jest's
//    globalSetup, a second server) must each find binaries the `postgres` user can run. They are
//    found by what they call (EMBEDDED_MARKERS), so a new such file is checked without a list to
//    keep; the whole suite runs as root on the embedded server earlier in .ci/run;
// 3. `npm start` (PORT=0: any free port) must print its URLs and answer GET /health; Ctrl-C
//    (SIGINT to its process group) must stop the app and then PostgreSQL ("[sample] stopped").
//
// Meaningful as root; as another user it still checks a fresh clone (and says so). The clone and
// the sample's data are removed afterwards; the binaries' copy in os.tmpdir() is kept (reused).

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startInGroup } from './sample-process.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// What a test file calls when it starts an embedded server of its own (directly or through a fixture).
const EMBEDDED_MARKERS =
  /startSecondServer\(|testing-global-setup|startTestPostgres\(|startEmbeddedServer\(|pgQueueGlobalSetup\(/;

/** The test files (relative to the repository) that start an embedded server, plus one quick plain file. */
function embeddedTestFiles() {
  const found = [];
  for (const dir of ['test/unit', 'test/integration', 'test/e2e']) {
    for (const name of fs.readdirSync(path.join(root, dir)).sort()) {
      if (!/\.(spec|int-spec|e2e-spec)\.ts$/.test(name)) continue;
      if (EMBEDDED_MARKERS.test(fs.readFileSync(path.join(root, dir, name), 'utf8'))) found.push(`${dir}/${name}`);
    }
  }
  if (found.length < 3)
    throw new Error(`expected at least 3 test files that start an embedded server, found: ${found.join(', ')}`);
  return ['test/integration/migrations.int-spec.ts', ...found];
}
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const STEP_DEADLINE_MS = 300_000;
const STOP_DEADLINE_MS = 60_000;

const log = (msg) => console.log(`[private-clone] ${msg}`);
const since = (t) => `${((Date.now() - t) / 1000).toFixed(1)} s`;
const { DATABASE_URL: _ignored, ...envWithoutDatabase } = process.env; // the point is the embedded server

async function runStep(label, cwd, args, env = envWithoutDatabase) {
  const t = Date.now();
  const proc = startInGroup(NPM, args, { cwd, env });
  const timer = setTimeout(() => proc.kill(), STEP_DEADLINE_MS);
  const { code, signal, error } = await proc.exited;
  clearTimeout(timer);
  if (code !== 0) {
    throw new Error(`${label} failed (${error?.message ?? code ?? signal}):\n${proc.text().split('\n').slice(-60).join('\n')}`);
  }
  log(`${label}: ok (${since(t)})`);
  return proc.text();
}

async function main() {
  const started = Date.now();
  const asRoot = process.getuid?.() === 0;
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  if (execFileSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).trim()) {
    log(`note: uncommitted changes are not tested, only commit ${head.slice(0, 12)}`);
  }
  const outer = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-private-')); // mkdtemp: mode 700
  const inner = fs.mkdtempSync(path.join(outer, 'home-'));
  const clone = path.join(inner, 'repo');
  let sampleDataParent = null;
  try {
    for (const d of [outer, inner]) fs.chmodSync(d, 0o700);
    log(
      `${asRoot ? 'as root' : `as uid ${process.getuid?.()} (not root: the postgres user is not involved)`}, ` +
        `clone of ${head.slice(0, 12)} in ${clone} (${outer} and ${inner} are mode 700)`,
    );
    execFileSync('git', ['clone', '--quiet', '--no-checkout', root, clone], { stdio: 'inherit' });
    execFileSync('git', ['-C', clone, 'checkout', '--quiet', head], { stdio: 'inherit' });

    await runStep('npm ci --offline', clone, ['ci', '--offline', '--no-audit', '--no-fund']);

    // PGQUEUE_TEST_SERVER=embedded: where npm test would pick Testcontainers (Docker answers), the
    // embedded server is still the one under test here.
    const testEnv = { ...envWithoutDatabase, PGQUEUE_TEST_SERVER: 'embedded' };
    const testFiles = embeddedTestFiles();
    const testOut = await runStep(`npm test -- ${testFiles.join(' ')}`, clone, ['test', '--', ...testFiles], testEnv);
    const binLine = testOut.match(/^\[test\] PostgreSQL binaries in .*$/m);
    if (asRoot && !binLine)
      throw new Error(`npm test ran as root in a private clone but did not say where the binaries are:\n${testOut}`);
    if (binLine) log(`  ${binLine[0]}`);

    const t = Date.now();
    const app = startInGroup(NPM, ['start'], { cwd: clone, env: { ...envWithoutDatabase, PORT: '0' } });
    try {
      const [, base] = await app.waitFor(/Listening on (http:\/\/127\.0\.0\.1:\d+)\. Try:/, STEP_DEADLINE_MS);
      const dataLine = app.text().match(/^\[sample\] starting embedded PostgreSQL \(data in (.+), kept between runs\)\.\.\.$/m);
      if (!dataLine) throw new Error(`npm start did not say where its data is:\n${app.text()}`);
      if (path.isAbsolute(dataLine[1]) && !dataLine[1].startsWith(clone)) sampleDataParent = path.dirname(dataLine[1]);
      const health = await fetch(`${base}/health`);
      if (health.status !== 200) throw new Error(`GET ${base}/health answered ${health.status}: ${await health.text()}`);
      log(`npm start: listening on ${base}, GET /health 200, data in ${dataLine[1]} (${since(t)})`);
      for (const line of app.text().match(/^\[sample\] \(.*\)$|^\[sample\] PostgreSQL binaries in .*$/gm) ?? []) log(`  ${line}`);
    } catch (e) {
      app.kill();
      throw e;
    }
    const stop = await app.interrupt(STOP_DEADLINE_MS);
    if (!/^\[sample\] app stopped \(SIGINT\)$/m.test(stop.after) || !/^\[sample\] stopped$/m.test(stop.after)) {
      throw new Error(`Ctrl-C did not stop the app, then PostgreSQL, cleanly (exit ${stop.code ?? stop.signal}):\n${stop.after}`);
    }
    log(`Ctrl-C: app stopped, then PostgreSQL (exit ${stop.code ?? stop.signal})`);
  } finally {
    fs.rmSync(outer, { recursive: true, force: true });
    if (sampleDataParent) fs.rmSync(sampleDataParent, { recursive: true, force: true });
  }
  log(`ok (${since(started)}, clean-up included)`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[private-clone] FAILED: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  },
);
