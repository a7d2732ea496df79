import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';

// The README's three dashboard pictures: how they are taken (from the sample app, in Chromium)
// and what they depend on. One code path for both callers: the browser test
// (screenshots.browser-spec.ts) takes them into a temp dir on every `npm test` and checks the
// committed ones against the manifest; `npm run docs:screenshots` runs that same test with
// PGQUEUE_UPDATE_SCREENSHOTS=1, which writes them into docs/ with a new manifest.

export const ROOT = path.resolve(__dirname, '..', '..');
export const DOCS = path.join(ROOT, 'docs');
export const MANIFEST = path.join(DOCS, 'dashboard-screenshots.json');
const SAMPLE_MAIN = path.join(ROOT, 'dist-sample', 'sample', 'main.js');
export const VIEWPORT = { width: 1280, height: 800 };
const DEADLINE_MS = 30_000;

/**
 * What shapes the pictures, hashed into the manifest: the pages (their sources, styles and
 * static files), how they are bundled, the sample app they show, and this file (the orders it
 * places, the pages it opens, the viewport). The server's code is not listed: the data it sends
 * is typed in lib/dashboard/ui/api.ts, so a change of what a page shows changes the UI sources.
 */
export const INPUTS = [
  'lib/dashboard/ui',
  'lib/dashboard/assets',
  'sample',
  'scripts/build-dashboard.mjs',
  'test/browser/screenshots.ts',
];

/** The three pictures: file in docs/, the page's path under the dashboard, what to wait for. */
export function shots(failedJobId: string): { file: string; path: string; ready: string }[] {
  return [
    { file: 'dashboard-overview.png', path: '/queues', ready: '[data-testid="throughput-chart"] canvas' },
    { file: 'dashboard-queue.png', path: '/queues/queues/warehouse?state=completed', ready: '[data-testid="jobs-table"]' },
    { file: 'dashboard-job.png', path: `/queues/jobs/${failedJobId}`, ready: '[data-testid="errors"]' },
  ];
}

export interface Manifest {
  readonly about: string;
  /** sha256 of each input file (path relative to the repository, `/` separators). */
  readonly inputs: Record<string, string>;
  /** sha256 of each committed PNG: binds the pictures to these inputs. */
  readonly screenshots: Record<string, string>;
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

function filesUnder(rel: string): string[] {
  const abs = path.join(ROOT, rel);
  if (!fs.statSync(abs).isDirectory()) return [rel];
  return fs
    .readdirSync(abs, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(`${rel}/${e.name}`) : [`${rel}/${e.name}`]));
}

/** The inputs' hashes now; text is hashed with LF line ends, so a CRLF checkout agrees. */
export function inputHashes(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of INPUTS.flatMap(filesUnder).sort()) {
    out[f] = sha256(fs.readFileSync(path.join(ROOT, f), 'utf8').replace(/\r\n/g, '\n'));
  }
  return out;
}

export function fileHash(file: string): string | null {
  return fs.existsSync(file) ? sha256(fs.readFileSync(file)) : null;
}

export function readManifest(): Manifest | null {
  return fs.existsSync(MANIFEST) ? (JSON.parse(fs.readFileSync(MANIFEST, 'utf8')) as Manifest) : null;
}

export function writeManifest(screenshots: Record<string, string>): void {
  const m: Manifest = {
    about:
      'Written by `npm run docs:screenshots` with the PNGs beside it. test/browser/screenshots.browser-spec.ts (in `npm test`) ' +
      'fails when an input changed since, or a PNG is not the one recorded here.',
    inputs: inputHashes(),
    screenshots,
  };
  fs.writeFileSync(MANIFEST, `${JSON.stringify(m, null, 2)}\n`);
}

/** What differs between the manifest and the inputs and PNGs now; empty when they agree. */
export function staleness(m: Manifest | null): string[] {
  if (!m) return [`${path.relative(ROOT, MANIFEST)} is missing`];
  const now = inputHashes();
  const out: string[] = [];
  for (const f of Object.keys({ ...m.inputs, ...now }).sort()) {
    if (!(f in now)) out.push(`${f} was removed`);
    else if (!(f in m.inputs)) out.push(`${f} is new`);
    else if (m.inputs[f] !== now[f]) out.push(`${f} changed`);
  }
  for (const { file } of shots('0')) {
    const h = fileHash(path.join(DOCS, file));
    if (h === null) out.push(`docs/${file} is missing`);
    else if (m.screenshots[file] !== h) out.push(`docs/${file} is not the picture the manifest records`);
  }
  return out;
}

/** Newest mtime of the files under `dir` (recursively) whose names pass `keep`. */
function newest(dir: string, keep: (name: string) => boolean): number {
  if (!fs.existsSync(dir)) return 0;
  let t = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, keep));
    else if (keep(e.name) && !e.name.startsWith('__lint_probe')) t = Math.max(t, fs.statSync(p).mtimeMs);
  }
  return t;
}

/**
 * Builds dist-sample/ (`npm run build:sample`: the sample and lib/ compiled, the pages bundled)
 * unless it is newer than every source it comes from, so the pictures show the code as it is.
 */
export function ensureSampleBuilt(log: (m: string) => void): void {
  const sources = Math.max(
    newest(path.join(ROOT, 'lib'), () => true),
    newest(path.join(ROOT, 'sample'), () => true),
  );
  const built = fs.existsSync(SAMPLE_MAIN) ? newest(path.join(ROOT, 'dist-sample'), () => true) : 0;
  if (built >= sources) return;
  log(built ? 'dist-sample/ is older than lib/ or sample/: npm run build:sample' : 'no dist-sample/ yet: npm run build:sample');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['run', 'build:sample'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm run build:sample failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
}

/** The sample (dist-sample/sample/main.js) on `databaseUrl` and a free port, as `npm start` runs it. */
export async function startSample(databaseUrl: string): Promise<{ base: string; stop(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [SAMPLE_MAIN], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  try {
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the sample did not listen within ${DEADLINE_MS} ms:\n${out}`)),
        DEADLINE_MS,
      );
      const onData = (d: Buffer) => {
        out += d.toString('utf8');
        const m = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`the sample exited (${child.exitCode ?? child.signalCode}) before listening:\n${out}`));
      });
    });
    return { base, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function waitFor<T>(what: string, fn: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The sample's data for the pictures: eight orders that complete and one ("unobtainium") whose
 * warehouse job fails on every attempt. Resolves with that failed job's id once every job settled.
 */
export async function placeOrders(base: string): Promise<string> {
  const post = async (item: string) => {
    const res = await fetch(`${base}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ item }),
    });
    if (!res.ok) throw new Error(`POST /orders ${item}: ${res.status} ${await res.text()}`);
  };
  for (const item of ['book', 'lamp', 'pen', 'desk', 'mug', 'chair', 'notebook', 'cable', 'unobtainium']) await post(item);
  const api = async <T>(p: string) => (await fetch(`${base}/queues/api${p}`)).json() as Promise<T>;
  const failed = await waitFor('the unobtainium job to fail for good', async () => {
    const r = await api<{ jobs?: { id: string }[] }>('/queues/warehouse/jobs?state=failed');
    return r.jobs?.[0] ?? null;
  });
  await waitFor('every other job to finish', async () => {
    const o = await api<{ queues: { waiting: number; delayed: number; active: number }[] }>('/overview');
    return o.queues.every((q) => q.waiting + q.delayed + q.active === 0) ? o : null;
  });
  return failed.id;
}

/** Photographs the three pages into `outDir`; returns each file's path. */
export async function takeScreenshots(context: BrowserContext, base: string, failedJobId: string, outDir: string) {
  const page = context.pages()[0] ?? (await context.newPage());
  const written: string[] = [];
  for (const s of shots(failedJobId)) {
    const res = await page.goto(base + s.path);
    if (res?.status() !== 200) throw new Error(`GET ${s.path} answered ${res?.status()}`);
    await page.locator(s.ready).first().waitFor({ timeout: DEADLINE_MS });
    await page.mouse.move(0, 0);
    const file = path.join(outDir, s.file);
    await page.screenshot({ path: file, fullPage: true });
    written.push(file);
  }
  return written;
}

/** Width and height of a PNG, from its IHDR chunk; throws unless `buf` is a PNG. */
export function pngSize(buf: Buffer): { width: number; height: number } {
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (buf.length < 24 || !buf.subarray(0, 8).equals(signature) || buf.toString('ascii', 12, 16) !== 'IHDR') {
    throw new Error('not a PNG');
  }
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}
