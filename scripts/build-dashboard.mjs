// Builds the dashboard's browser bundle (lib/dashboard/ui/) into dist/dashboard/assets/:
//
//   node scripts/build-dashboard.mjs [--out DIR]   (`npm run build` runs it after tsc)
//
// 1. type-checks the UI with its own tsconfig (DOM types, Preact's JSX);
// 2. esbuild bundles main.tsx with Preact and uPlot into app-<hash>.js and app-<hash>.css
//    (content hashes: the server sends them with a long cache lifetime);
// 3. writes index.html from lib/dashboard/ui/index.html naming those two files (over the
//    placeholder of lib/dashboard/assets that the package build copied). The server
//    (lib/dashboard/dashboard-assets.ts) reads it as its template: it adds the <meta> settings
//    and replaces %BASE% by the mount path.
// DIR defaults to dist/dashboard/assets, the folder the compiled module serves from (next to
// dist/dashboard/*.js); `npm run build:sample` also builds into dist-sample/lib/dashboard/assets
// for the sample, which compiles lib/ itself. Prints the sizes, raw and gzipped. Nothing is
// fetched at run time: no CDN, works offline.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import * as esbuild from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const UI = path.join(root, 'lib', 'dashboard', 'ui');
const outArg = process.argv.indexOf('--out');
const OUT = outArg > 0 ? path.resolve(root, process.argv[outArg + 1]) : path.join(root, 'dist', 'dashboard', 'assets');

const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(UI, 'tsconfig.json')], {
  cwd: root,
  stdio: 'inherit',
});
if (tsc.status !== 0) {
  console.error('[dashboard] type errors in lib/dashboard/ui (see above)');
  process.exit(1);
}

// Earlier bundles go; the static files of lib/dashboard/assets (favicon.svg) come along, so
// --out gets a complete folder too. Its index.html is the placeholder that step 3 replaces.
fs.mkdirSync(OUT, { recursive: true });
for (const f of fs.readdirSync(OUT)) if (/^app-.*\.(js|css)$/.test(f)) fs.rmSync(path.join(OUT, f));
const STATIC = path.join(root, 'lib', 'dashboard', 'assets');
for (const f of fs.readdirSync(STATIC)) if (f !== 'index.html') fs.copyFileSync(path.join(STATIC, f), path.join(OUT, f));
const result = await esbuild.build({
  entryPoints: { app: path.join(UI, 'main.tsx') },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome109', 'firefox115', 'safari15.6'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  tsconfig: path.join(UI, 'tsconfig.json'),
  entryNames: '[name]-[hash]',
  outdir: OUT,
  metafile: true,
  legalComments: 'eof',
  sourcemap: false,
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((f) => path.basename(f));
const js = outputs.find((f) => f.endsWith('.js'));
const css = outputs.find((f) => f.endsWith('.css'));
if (!js || !css) throw new Error(`esbuild wrote ${outputs.join(', ')}: expected one .js and one .css`);
const template = fs.readFileSync(path.join(UI, 'index.html'), 'utf8');
if (!template.includes('{{js}}') || !template.includes('{{css}}'))
  throw new Error('lib/dashboard/ui/index.html must name {{js}} and {{css}}');
fs.writeFileSync(path.join(OUT, 'index.html'), template.replace('{{js}}', js).replace('{{css}}', css));

const size = (f) => {
  const buf = fs.readFileSync(path.join(OUT, f));
  return { raw: buf.length, gzip: zlib.gzipSync(buf, { level: 9 }).length };
};
const s = { js: size(js), css: size(css) };
const kb = (n) => `${(n / 1024).toFixed(1)} kB`;
console.log(
  `[dashboard] ${path.relative(root, OUT)}: ${js} ${kb(s.js.raw)} (gzip ${kb(s.js.gzip)}), ` +
    `${css} ${kb(s.css.raw)} (gzip ${kb(s.css.gzip)})`,
);
