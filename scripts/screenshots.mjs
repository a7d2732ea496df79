// `npm run docs:screenshots`: the README's dashboard pictures, taken from the sample app.
//
//   npm run docs:screenshots        (builds the package and the sample first)
//
// Starts PostgreSQL (DATABASE_URL's server, on a fresh database that is dropped at the end, or a
// throwaway embedded one), runs the sample (dist-sample/sample/main.js) on a free port, places a
// few orders through its HTTP API (one fails on every attempt), waits until its jobs settle, and
// has Debian's Chromium (playwright-core, /usr/bin/chromium) photograph the dashboard's overview,
// the warehouse queue and the failed job into docs/dashboard-{overview,queue,job}.png.
// Exits non-zero when a step fails (so a page that no longer renders cannot go unnoticed).

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createDatabase, databaseUrl, dropDatabase, startPostgres } from './pg-server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const APP = path.join(root, 'dist-sample', 'sample', 'main.js');
const CHROMIUM = process.env.PGQUEUE_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
];
const DEADLINE_MS = 30_000;
const log = (m) => console.log(`[screenshots] ${m}`);

async function waitFor(what, fn) {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Runs the sample on `url`; resolves with its base URL once it prints where it listens. */
function startSample(url) {
  const child = spawn(process.execPath, [APP], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: url, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const listening = new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`the sample exited (${code}) before listening:\n${out}`)));
  });
  return { child, listening };
}

async function main() {
  if (!fs.existsSync(APP))
    throw new Error('dist-sample/ is missing: run `npm run build && npm run build:sample` (the npm script does).');
  if (!fs.existsSync(CHROMIUM)) throw new Error(`No Chromium at ${CHROMIUM}: \`apt-get install chromium\`.`);
  const server = await startPostgres({ persistent: false });
  const dbName = `pgqueue_screens_${randomBytes(3).toString('hex')}`;
  await createDatabase(server.url, dbName);
  const url = databaseUrl(server.url, dbName);
  const sample = startSample(url);
  let browser;
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-chromium-'));
  try {
    const base = await sample.listening;
    log(`sample at ${base}`);
    const post = (body) =>
      fetch(`${base}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((r) => r.json());
    const items = ['book', 'lamp', 'pen', 'desk', 'mug', 'chair', 'notebook', 'cable'];
    for (const item of items) await post({ item });
    const failing = await post({ item: 'unobtainium' });
    const failedId = failing.warehouseJob?.id ?? failing.job?.id;
    log(`placed ${items.length + 1} orders`);

    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width: 1280, height: 800 },
      deviceScaleFactor: 1,
      locale: 'en-US',
      timezoneId: 'UTC',
    });
    const page = browser.pages()[0] ?? (await browser.newPage());
    const api = async (p) => (await page.request.get(`${base}/queues/api${p}`)).json();

    // The warehouse job of "unobtainium" fails on each of its 3 attempts; wait until it has.
    const failed = await waitFor('the unobtainium job to fail for good', async () => {
      const r = await api('/queues/warehouse/jobs?state=failed');
      return r.jobs?.[0] ?? null;
    });
    await waitFor('every other job to finish', async () => {
      const o = await api('/overview');
      return o.queues.every((q) => q.waiting + q.delayed + q.active === 0) ? o : null;
    });
    log(`failed job ${failed.id}${failedId ? ` (order answer named ${failedId})` : ''}`);

    const shots = [
      ['dashboard-overview.png', '/queues', '[data-testid="throughput-chart"] canvas'],
      ['dashboard-queue.png', '/queues/queues/warehouse?state=completed', '[data-testid="jobs-table"]'],
      ['dashboard-job.png', `/queues/jobs/${failed.id}`, '[data-testid="errors"]'],
    ];
    for (const [file, p, ready] of shots) {
      await page.goto(base + p);
      await page.locator(ready).first().waitFor({ timeout: DEADLINE_MS });
      await page.mouse.move(0, 0);
      const out = path.join(root, 'docs', file);
      await page.screenshot({ path: out, fullPage: true });
      log(`wrote ${path.relative(root, out)}`);
    }
  } finally {
    await browser?.close().catch(() => undefined);
    fs.rmSync(profile, { recursive: true, force: true });
    sample.child.kill('SIGTERM');
    await new Promise((r) => (sample.child.exitCode !== null ? r() : sample.child.once('exit', r)));
    await dropDatabase(server.url, dbName).catch((e) => log(`could not drop ${dbName}: ${e.message}`));
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`[screenshots] ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  },
);
