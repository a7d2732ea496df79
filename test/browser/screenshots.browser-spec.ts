import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { launchChromium, type Browser } from './browser';
import {
  DOCS,
  ensureSampleBuilt,
  fileHash,
  pngSize,
  placeOrders,
  readManifest,
  shots,
  staleness,
  startSample,
  takeScreenshots,
  VIEWPORT,
  writeManifest,
} from './screenshots';

// The README's dashboard pictures, taken from the sample app (dist-sample, as `npm start` runs
// it) in Chromium on every run, and the committed ones checked against what shapes them. The
// pictures hold times and ids, so no two runs give the same pixels: a picture cannot be compared
// with a fresh one. Instead docs/dashboard-screenshots.json records the hash of every input
// (./screenshots.ts INPUTS) and of each committed PNG, written by the run that took them
// (`npm run docs:screenshots`, which runs this file with PGQUEUE_UPDATE_SCREENSHOTS=1 and
// writes into docs/). Here, without it, the pictures go to a temp dir and the test fails when an
// input changed since the committed ones were taken.

const UPDATE = process.env.PGQUEUE_UPDATE_SCREENSHOTS === '1';
const log = (m: string) => process.stderr.write(`[screenshots] ${m}\n`);

describe('the README screenshots, from the sample app in Chromium', () => {
  let db: TestDatabase;
  let sample: { base: string; stop(): Promise<void> } | undefined;
  let browser: Browser | undefined;
  let outDir: string;
  let written: string[] = [];
  const pageErrors: string[] = [];
  // Read before this run can write anything: what the committed pictures were taken from.
  const committed = readManifest();

  beforeAll(async () => {
    ensureSampleBuilt(log);
    db = await createTestDatabase();
    sample = await startSample(db.url);
    const failedJobId = await placeOrders(sample.base);
    browser = await launchChromium(VIEWPORT);
    browser.context.on('page', (p) => p.on('pageerror', (e) => pageErrors.push(e.message)));
    for (const p of browser.context.pages()) p.on('pageerror', (e) => pageErrors.push(e.message));
    outDir = UPDATE ? DOCS : fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-screens-'));
    written = await takeScreenshots(browser.context, sample.base, failedJobId, outDir);
    if (UPDATE) {
      writeManifest(Object.fromEntries(written.map((f) => [path.basename(f), fileHash(f) as string])));
      log(`wrote ${written.map((f) => path.relative(process.cwd(), f)).join(', ')} and docs/dashboard-screenshots.json`);
    }
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await sample?.stop();
    await db?.drop();
    if (!UPDATE && outDir) fs.rmSync(outDir, { recursive: true, force: true });
  });

  it('takes the overview, a queue and a failed job: three full-page PNGs at the viewport width, no script error', () => {
    expect(written.map((f) => path.basename(f))).toEqual(shots('0').map((s) => s.file));
    for (const f of written) {
      const { width, height } = pngSize(fs.readFileSync(f));
      expect([path.basename(f), width]).toEqual([path.basename(f), VIEWPORT.width]);
      expect(height).toBeGreaterThanOrEqual(VIEWPORT.height);
    }
    expect(pageErrors).toEqual([]);
  });

  it('the committed pictures (docs/dashboard-*.png) were taken from the pages and sample as they are now', () => {
    const stale = staleness(UPDATE ? readManifest() : committed);
    if (stale.length) {
      throw new Error(
        `The README's dashboard screenshots are stale: ${stale.join('; ')}. ` +
          'Run `npm run docs:screenshots` and commit docs/dashboard-*.png with docs/dashboard-screenshots.json.',
      );
    }
  });
});
