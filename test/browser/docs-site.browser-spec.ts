import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Page } from 'playwright-core';
import ts from 'typescript';
import { launchChromium, type Browser } from './browser';

// The docs site as built by `npm run docs:build` (scripts/build-docs.mjs: the TypeDoc reference,
// then VitePress), served from docs/.vitepress/dist and read in Chromium. The build runs here only
// when the site is older than docs/ or lib/ (`--if-stale`), so `npm test` on a fresh clone works.

const ROOT = path.resolve(__dirname, '..', '..');
const DOCS = path.join(ROOT, 'docs');
const DIST = path.join(DOCS, '.vitepress', 'dist');
const WAIT_MS = 15_000;

/** A static server for the built site, as a host with clean URLs serves it: /x is x.html, /d/ is d/index.html. */
function serve(dir: string): Promise<{ base: string; close(): Promise<void> }> {
  const types: Record<string, string> = {
    '.html': 'text/html; charset=utf-8',
    '.js': 'text/javascript',
    '.css': 'text/css',
    '.json': 'application/json',
    '.svg': 'image/svg+xml',
    '.png': 'image/png',
    '.woff2': 'font/woff2',
  };
  const server = http.createServer((req, res) => {
    const urlPath = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    let rel = urlPath.endsWith('/') ? `${urlPath}index.html` : path.extname(urlPath) ? urlPath : `${urlPath}.html`;
    let file = path.join(dir, rel);
    if (!file.startsWith(dir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      rel = '/404.html';
      file = path.join(dir, rel);
      res.statusCode = 404;
    }
    res.setHeader('content-type', types[path.extname(file)] ?? 'application/octet-stream');
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise<void>((done) => server.close(() => done())),
      }),
    ),
  );
}

/** A page's first `# ` heading outside code fences (the title the site shows). */
function titleOf(file: string): string {
  let inFence = false;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    else if (!inFence && line.startsWith('# ')) return line.slice(2).trim();
  }
  throw new Error(`${file} has no # title`);
}

/**
 * Every name an entry point exports, types included, read from its source's export declarations
 * (the entry points only re-export by name; a type checker would cost this test half a minute).
 */
function exportsOf(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022);
  const names: string[] = [];
  for (const node of source.statements) {
    if (ts.isExportDeclaration(node)) {
      if (!node.exportClause || !ts.isNamedExports(node.exportClause))
        throw new Error(`${file}: \`export *\` is not read by this test: export by name`);
      for (const e of node.exportClause.elements) names.push(e.name.text);
    } else if (
      (ts.isClassDeclaration(node) ||
        ts.isFunctionDeclaration(node) ||
        ts.isInterfaceDeclaration(node) ||
        ts.isTypeAliasDeclaration(node)) &&
      node.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword) &&
      node.name
    ) {
      names.push(node.name.text);
    } else if (ts.isVariableStatement(node) && node.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      for (const d of node.declarationList.declarations) if (ts.isIdentifier(d.name)) names.push(d.name.text);
    }
  }
  return names;
}

/** The entry points as package.json exports them, by TypeDoc's module name (the folder, `index` for the main one). */
function entryPoints(): Record<string, string> {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  const entries: Record<string, string> = {};
  for (const subpath of Object.keys(pkg.exports)) {
    if (subpath === './package.json') continue;
    const dir = subpath === '.' ? '' : subpath.slice(2);
    entries[dir || 'index'] = path.join(ROOT, 'lib', dir, 'index.ts');
  }
  return entries;
}

describe('docs site in a real browser (Chromium, the built VitePress site)', () => {
  let site: { base: string; close(): Promise<void> };
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    // Minutes on a busy 2-core machine; nothing when CI's `npm run docs:build` has just run.
    execFileSync(process.execPath, [path.join(ROOT, 'scripts', 'build-docs.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
    site = await serve(DIST);
    browser = await launchChromium();
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    await site?.close();
  });

  it('renders the home page (or the first page when docs/index.md is not written yet) with the sidebar in the docs plan order', async () => {
    const pages = fs.readdirSync(DOCS).filter((f) => f.endsWith('.md'));
    const home = pages.includes('index.md') ? '/' : '/quick-start';
    const res = await page.goto(site.base + home);
    expect(res?.status()).toBe(200);
    const title = titleOf(path.join(DOCS, home === '/' ? 'index.md' : 'quick-start.md'));
    await expect(page.locator('.vp-doc h1, .VPHero .name, .VPHero .text').first().innerText()).resolves.toContain(
      title.replace(/`/g, ''),
    );
    // Every page of docs/ is in the sidebar, under its own title.
    const sidebar = await page.locator('.VPSidebar a.VPLink').evaluateAll((as) => as.map((a) => a.textContent?.trim() ?? ''));
    for (const file of pages) expect(sidebar).toContain(titleOf(path.join(DOCS, file)).replace(/`/g, ''));
    expect(sidebar).toContain('Entry points');
  });

  it('finds a term with the local search, and its result opens the page', async () => {
    const search = async (term: string) => {
      await page.goto(`${site.base}/quick-start`);
      await page.locator('.VPNavBarSearch button').click();
      const input = page.locator('.VPLocalSearchBox input');
      await input.fill(term);
      return page.locator('.VPLocalSearchBox .results a.result');
    };
    // A class of the reference: its page's title is the first result.
    let results = await search('PgQueueHealthIndicator');
    const hit = results.first();
    await hit.waitFor({ timeout: WAIT_MS });
    await expect(hit.getAttribute('aria-label')).resolves.toBe('Class: PgQueueHealthIndicator');
    await hit.click();
    await page.waitForURL(/\/api\/health\/classes\/PgQueueHealthIndicator(#[\w-]*)?$/, { timeout: WAIT_MS });
    // The router changes the URL before it renders the page: wait for the new title, not the old one.
    await page.locator('.vp-doc h1', { hasText: 'PgQueueHealthIndicator' }).waitFor({ timeout: WAIT_MS });

    // A guide page, by a word of its title.
    results = await search('threat model');
    await results.first().waitFor({ timeout: WAIT_MS });
    const hrefs = await results.evaluateAll((as) => as.map((a) => new URL((a as HTMLAnchorElement).href).pathname));
    expect(hrefs.some((h) => h === '/security' || h.startsWith('/security#'))).toBe(true);
  });

  it('has no broken internal link: every page answers, every #anchor exists', async () => {
    // Every built page, plus whatever the pages and the sidebar link to.
    const queue = new Set<string>();
    const walk = (dir: string, prefix: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory() && e.name !== 'assets') walk(path.join(dir, e.name), `${prefix}${e.name}/`);
        else if (e.name.endsWith('.html') && e.name !== '404.html')
          queue.add(`/${prefix}${e.name === 'index.html' ? '' : e.name.slice(0, -'.html'.length)}`);
      }
    };
    walk(DIST, '');
    const ids = new Map<string, Set<string>>();
    const anchors: { from: string; to: string; hash: string }[] = [];
    const broken: string[] = [];
    const images = new Map<string, string>();
    const seen = new Set<string>();
    const origin = new URL(site.base).origin;
    // The HTML as built carries every id and link (VitePress prerenders each page): the crawl
    // loads only the documents, not the scripts, styles and fonts of each.
    await page.route('**/*', (route) => (route.request().resourceType() === 'document' ? route.continue() : route.abort()));
    while (queue.size) {
      const [next] = queue;
      queue.delete(next);
      if (seen.has(next)) continue;
      seen.add(next);
      const res = await page.goto(site.base + next, { waitUntil: 'domcontentloaded' });
      if (res?.status() !== 200) {
        broken.push(`${next}: HTTP ${res?.status()}`);
        continue;
      }
      const found = await page.evaluate(() => ({
        ids: [...document.querySelectorAll('[id]')].map((e) => e.id),
        links: [...document.querySelectorAll('.VPContent a[href], .VPSidebar a[href], .VPNav a[href]')].map(
          (a) => (a as HTMLAnchorElement).href,
        ),
        images: [...document.querySelectorAll('.VPContent img[src]')].map((i) => (i as HTMLImageElement).src),
      }));
      ids.set(next, new Set(found.ids));
      for (const src of found.images) images.set(src, next);
      for (const href of found.links) {
        const u = new URL(href);
        if (u.origin !== origin) continue;
        const p = u.pathname.replace(/\.html$/, '').replace(/(.)\/index$/, '$1/');
        if (!seen.has(p)) queue.add(p);
        if (u.hash.length > 1) anchors.push({ from: next, to: p, hash: decodeURIComponent(u.hash.slice(1)) });
      }
    }
    await page.unroute('**/*');
    for (const [src, from] of images) {
      const status = src.startsWith(origin) ? (await fetch(src)).status : 200; // a remote image is not ours to check
      if (status !== 200) broken.push(`${from} shows ${src}: HTTP ${status}`);
    }
    for (const a of anchors) {
      if (!ids.get(a.to)?.has(a.hash)) broken.push(`${a.from} links to ${a.to}#${a.hash}: no such anchor`);
    }
    expect(broken).toEqual([]);
    expect(seen.size).toBeGreaterThan(20);
  }, 300_000);

  it('lists every public export of every entry point in the API reference', async () => {
    const missing: string[] = [];
    for (const [module, file] of Object.entries(entryPoints())) {
      const names = exportsOf(file);
      const res = await page.goto(`${site.base}/api/${module}/`, { waitUntil: 'domcontentloaded' });
      expect(res?.status()).toBe(200);
      const listed = new Set(await page.locator('.vp-doc a').evaluateAll((as) => as.map((a) => a.textContent?.trim() ?? '')));
      for (const name of names) if (!listed.has(name)) missing.push(`${module}: ${name}`);
      expect(names.length).toBeGreaterThan(0);
    }
    expect(missing).toEqual([]);
  });
});
