import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import type { ResolvedDashboardOptions } from './dashboard.options';

/** Where the built front end lies: dist/dashboard/assets in the package, lib/dashboard/assets in the repository. */
export const ASSETS_DIR = join(__dirname, 'assets');

/** The headers of every HTML answer: no inline script can run, nothing may frame the page. */
export const HTML_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** A file name the assets route serves: one path segment of safe characters with a known extension. */
export function isSafeAssetName(file: string): boolean {
  return (
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(file) && !file.includes('..') && TYPES[extname(file).toLowerCase()] !== undefined
  );
}

/** A name with a content hash (`app-3F9A1C2B.js`, `app.3f9a1c2b.js`): cached for a year, never revalidated. */
export function isHashedName(file: string): boolean {
  return /[.-][A-Za-z0-9_]{8,}\.[a-z0-9]+$/.test(file);
}

/** An asset as served. */
export interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly cacheControl: string;
}

function escapeAttr(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The built front end, read once at boot: only files present then are served (so no request can
 * name a path outside the folder), and index.html is rendered once with the settings.
 */
export class DashboardAssets {
  private readonly files = new Map<string, Asset>();
  readonly html: string;

  constructor(options: ResolvedDashboardOptions, dir = ASSETS_DIR) {
    for (const file of readdirSync(dir)) {
      if (file === 'index.html' || !isSafeAssetName(file) || !statSync(join(dir, file)).isFile()) continue;
      this.files.set(file, {
        body: readFileSync(join(dir, file)),
        type: TYPES[extname(file).toLowerCase()],
        cacheControl: isHashedName(file) ? 'public, max-age=31536000, immutable' : 'no-cache',
      });
    }
    this.html = renderIndex(readFileSync(join(dir, 'index.html'), 'utf8'), options);
  }

  get(file: string): Asset | undefined {
    return isSafeAssetName(file) ? this.files.get(file) : undefined;
  }
}

/**
 * index.html with the settings as `<meta>` tags right after `<head>` (the page reads them; no
 * inline script), `%BASE%` replaced by the mount path (for asset URLs) and the title set.
 */
export function renderIndex(template: string, o: ResolvedDashboardOptions): string {
  const meta = [
    ['pgq-base', o.path],
    ['pgq-title', o.title],
    ['pgq-read-only', String(o.readOnly)],
    ['pgq-refresh-ms', String(o.refreshIntervalMs)],
  ]
    .map(([name, content]) => `<meta name="${name}" content="${escapeAttr(content)}">`)
    .join('');
  return template
    .replace(/<head>/i, (h) => `${h}${meta}`)
    .replace(/<title>[^<]*<\/title>/i, `<title>${escapeAttr(o.title)}</title>`)
    .replace(/%BASE%/g, escapeAttr(o.path));
}
