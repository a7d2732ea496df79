// `npm run check:package`: does the published package work for a stranger? Packs the package once
// (after `npm run build`), then, against that tarball:
//   1. its contents: LICENSE, CHANGELOG.md, README.md, the migrations and every entry point are in;
//      every .map's sources are inlined or inside the tarball; no test, bench or sample files;
//   2. package.json's exports/typesVersions agree with scripts/entry-points.mjs;
//   3. small consumer projects type-check (strict, skipLibCheck false) under each valid
//      moduleResolution x module, CommonJS- and ESM-style, with only the peers the README names
//      (no @types/pg, no typeorm), plus two that pass real pg objects with @types/pg installed;
//      and each entry point loads at runtime with require() and import();
//   4. @arethetypeswrong/cli and publint; the "bin" commands run (--help) from node_modules/.bin;
//   5. the package page: package.json's repository, homepage, bugs and keywords, and no relative
//      link or image in the packed README that points at a file the tarball does not hold (npm
//      shows the README without the repository: such a link is dead there, such an image broken).
// Needs no network: the tarball is unpacked into each consumer's node_modules and the peers are
// symlinked from this repository's node_modules. Exits 1 with one line per problem.
//
//   npm run check:package            (checks package.json against the entry points as committed,
//                                     since the build rewrites it, then builds)
//   node scripts/check-package.mjs   (uses the current dist/)
//   --keep                           keeps the temp folder and prints its path
//   --page                           checks only steps 1 and 5, the tarball's contents and the
//                                    package page (seconds instead of minutes)

import { execFile as execFileCb, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ENTRY_POINTS, packageJsonProblems } from './entry-points.mjs';
import { markdownLinks } from './markdown-links.mjs';

const execFile = promisify(execFileCb);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const started = Date.now();
const problems = [];
const problem = (area, text) => problems.push(`[${area}] ${text}`);
const step = (text) => console.log(`[check:package] ${text} (${((Date.now() - started) / 1000).toFixed(1)} s)`);

/** The peers a consumer installs: the README's "Install into an existing Nest app" list, minus typeorm (optional). */
const BASE_PEERS = ['@nestjs/common', '@nestjs/core', 'pg', 'reflect-metadata', 'rxjs'];
/** Not a peer of ours, but every TypeScript Node app has it (the Nest CLI's template does). */
const TOOLING = ['@types/node'];

/**
 * The consumer projects: every valid pairing of moduleResolution and module. `pgTypes` ones
 * install @types/pg and pass real pg objects (point: our own pg types accept pg's).
 */
const CONSUMERS = [
  { name: 'node10-commonjs', moduleResolution: 'node10', module: 'commonjs', type: 'commonjs' },
  { name: 'node16-cjs', moduleResolution: 'node16', module: 'node16', type: 'commonjs' },
  { name: 'node16-esm', moduleResolution: 'node16', module: 'node16', type: 'module' },
  { name: 'nodenext-cjs', moduleResolution: 'nodenext', module: 'nodenext', type: 'commonjs' },
  { name: 'nodenext-esm', moduleResolution: 'nodenext', module: 'nodenext', type: 'module' },
  { name: 'bundler-esnext', moduleResolution: 'bundler', module: 'esnext', type: 'module' },
  { name: 'bundler-preserve', moduleResolution: 'bundler', module: 'preserve', type: 'module' },
  { name: 'node10-commonjs-with-types-pg', moduleResolution: 'node10', module: 'commonjs', type: 'commonjs', pgTypes: true },
  { name: 'nodenext-esm-with-types-pg', moduleResolution: 'nodenext', module: 'nodenext', type: 'module', pgTypes: true },
];

const importName = (e) => (e.subpath === '.' ? pkg.name : `${pkg.name}/${e.subpath.slice(2)}`);
const ident = (e) => `entry_${e.dir || 'main'}`.replace(/[^A-Za-z0-9_]/g, '_');

/** What every consumer compiles: each entry point, and the README's usage with a pg connection. */
function consumerSource(c) {
  const lines = [
    "import 'reflect-metadata';",
    "import { Injectable, Module } from '@nestjs/common';",
    "import { InjectQueue, PgQueueModule, Process, Processor, type Job, type Queue, type TransactionClient } from 'nestjs-pg-queue';",
    ...ENTRY_POINTS.map((e) => `import * as ${ident(e)} from '${importName(e)}';`),
    `export const entryPoints: object[] = [${ENTRY_POINTS.map(ident).join(', ')}];`,
    "type EmailJobs = { 'order-confirmation': { orderId: number } };",
    "@Processor('email')",
    'export class EmailProcessor {',
    "  @Process('order-confirmation')",
    '  async confirm(job: Job<{ orderId: number }>): Promise<number> {',
    '    return job.payload.orderId;',
    '  }',
    '}',
    '@Injectable()',
    'export class OrdersService {',
    "  constructor(@InjectQueue('email') private readonly email: Queue<EmailJobs>) {}",
    '  async place(client: TransactionClient): Promise<string> {',
    "    const job = await this.email.add('order-confirmation', { orderId: 1 }, { client });",
    '    return job.id;',
    '  }',
    '}',
    '@Module({',
    '  imports: [',
    '    PgQueueModule.forRoot({',
    "      connection: { host: 'localhost', port: 5432, password: async () => 'secret', ssl: { rejectUnauthorized: false }, max: 2 },",
    '    }),',
    "    PgQueueModule.registerQueue({ name: 'email' }),",
    '  ],',
    '  providers: [EmailProcessor, OrdersService],',
    '})',
    'export class AppModule {}',
    // The connection options are typed, not `any`: a wrong type and a misspelt option fail.
    '// @ts-expect-error port is a number',
    "PgQueueModule.forRoot({ connection: { port: '5432' } });",
    '// @ts-expect-error no such pg option',
    "PgQueueModule.forRoot({ connection: { hots: 'localhost' } });",
  ];
  if (c.pgTypes) {
    lines.push(
      "import { Client, Pool, type ClientConfig, type PoolConfig } from 'pg';",
      "const poolConfig: PoolConfig = { connectionString: 'postgres://localhost/app', max: 4, ssl: { rejectUnauthorized: false } };",
      "const clientConfig: ClientConfig = { host: 'localhost', keepAlive: true, statement_timeout: false };",
      'PgQueueModule.forRoot({ connection: poolConfig, listenConnection: clientConfig });',
      "import type { PgQueueModuleOptions } from 'nestjs-pg-queue';",
      "type OurPoolConfig = Exclude<PgQueueModuleOptions['connection'], string | undefined>;",
      'type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;',
      "// lib/core/pg-types.ts must name every option of pg's PoolConfig: one that @types/pg added, or we lost, fails here",
      'export const sameOptions: Same<keyof PoolConfig, keyof OurPoolConfig> = true;',
      'export async function enqueueWithPg(queue: Queue<EmailJobs>, pool: Pool, client: Client): Promise<void> {',
      '  const poolClient = await pool.connect();',
      "  await queue.add('order-confirmation', { orderId: 2 }, { client: poolClient });",
      "  await queue.add('order-confirmation', { orderId: 3 }, { client });",
      '  poolClient.release();',
      '}',
    );
  }
  return lines.join('\n') + '\n';
}

function tsconfig(c) {
  return {
    compilerOptions: {
      strict: true,
      skipLibCheck: false,
      noEmit: true,
      target: 'ES2022',
      module: c.module,
      moduleResolution: c.moduleResolution,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
      forceConsistentCasingInFileNames: true,
      types: ['node', ...(c.pgTypes ? ['pg'] : [])],
    },
    files: ['index.ts'],
  };
}

/** Symlinks `name` from the repo's node_modules into `nodeModules`. */
function linkPackage(nodeModules, name) {
  const from = path.join(root, 'node_modules', name);
  if (!fs.existsSync(from)) throw new Error(`${name} is not installed in ${path.join(root, 'node_modules')}: run npm ci`);
  const to = path.join(nodeModules, name);
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.symlinkSync(from, to, 'dir');
}

/** The names of the dependencies of the packed package that a consumer gets from npm install. */
const dependencies = () => Object.keys(pkg.dependencies ?? {});

function checkContents(files, unpacked) {
  const has = new Set(files);
  const required = ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'];
  for (const f of fs.readdirSync(path.join(root, 'migrations'))) required.push(`migrations/${f}`);
  for (const e of ENTRY_POINTS) {
    const base = `dist/${e.dir ? `${e.dir}/` : ''}index`;
    required.push(`${base}.js`, `${base}.d.ts`);
    if (!fs.existsSync(path.join(root, 'lib', e.dir, 'index.ts'))) {
      problem(
        'entry points',
        `${e.subpath} is listed in scripts/entry-points.mjs but lib/${e.dir ? `${e.dir}/` : ''}index.ts does not exist.`,
      );
    }
  }
  for (const f of Object.values(pkg.bin ?? {})) required.push(path.posix.normalize(f));
  for (const f of required) if (!has.has(f)) problem('contents', `the tarball lacks ${f}.`);
  const forbidden =
    /(^|\/)(test|tests|bench|sample|coverage|\.ci|scripts)\/|\.(spec|int-spec|e2e-spec|test)\.|(^|\/)tsconfig[^/]*\.json$|^dist-sample\//;
  for (const f of files)
    if (forbidden.test(f)) problem('contents', `the tarball should not contain ${f} (test, bench, sample or build file).`);

  let maps = 0;
  for (const f of files.filter((x) => x.endsWith('.map'))) {
    maps++;
    const map = JSON.parse(fs.readFileSync(path.join(unpacked, f), 'utf8'));
    (map.sources ?? []).forEach((src, i) => {
      if (typeof map.sourcesContent?.[i] === 'string') return;
      const rel = path.posix.normalize(path.posix.join(path.posix.dirname(f), map.sourceRoot ?? '', src));
      if (!has.has(rel))
        problem('source maps', `${f} points at ${src}, which is neither inlined (sourcesContent) nor in the tarball.`);
    });
  }
  return maps;
}

/** package.json's fields the npm page is made of: the repository, homepage and issues links, and the search keywords. */
function checkMetadata() {
  const repo = /^git\+https:\/\/github\.com\/([\w.-]+\/[\w.-]+?)\.git$/.exec(pkg.repository?.url ?? '')?.[1];
  if (pkg.repository?.type !== 'git' || !repo) {
    problem(
      'package page',
      'package.json needs "repository": { "type": "git", "url": "git+https://github.com/<owner>/<name>.git" } (npm links it; the docs link check reads it).',
    );
  }
  const github = repo ? `https://github.com/${repo}` : 'https://github.com/';
  if (typeof pkg.homepage !== 'string' || !pkg.homepage.startsWith('https://'))
    problem('package page', `package.json needs "homepage": the docs site, or ${github}#readme.`);
  const bugs = typeof pkg.bugs === 'string' ? pkg.bugs : pkg.bugs?.url;
  if (typeof bugs !== 'string' || !bugs.startsWith(github))
    problem('package page', `package.json needs "bugs": { "url": "${github}/issues" }.`);
  if (!Array.isArray(pkg.keywords) || !pkg.keywords.length || pkg.keywords.some((k) => typeof k !== 'string' || !k.trim()))
    problem('package page', 'package.json needs "keywords": a list of words npm search finds the package by.');
  return repo;
}

/**
 * The README as npm shows it (the packed one): every relative link or image must name a file the
 * tarball holds; anything else must be absolute (a page: https://github.com/<repo>/blob/main/<path>;
 * an image: https://raw.githubusercontent.com/<repo>/main/<path>). Same-page #anchors are fine.
 */
function checkPackedReadme(unpacked, files, repo) {
  const has = new Set(files);
  const text = fs.readFileSync(path.join(unpacked, 'README.md'), 'utf8');
  let links = 0;
  for (const { line, url } of markdownLinks(text)) {
    links++;
    const image = /\.(png|jpe?g|gif|svg|webp|avif)([?#].*)?$/i.test(url);
    if (image && /^https:\/\/github\.com\/[^/]+\/[^/]+\/blob\//.test(url)) {
      // A blob URL is GitHub's page about the file, not the file: npm shows no image.
      problem(
        'package page',
        `README.md:${line} shows ${url}, a GitHub page, not an image: use its raw.githubusercontent.com URL.`,
      );
      continue;
    }
    if (url === '' || url.startsWith('#') || /^[a-z][a-z\d+.-]*:/i.test(url) || url.startsWith('//')) continue;
    let file;
    try {
      file = path.posix.normalize(decodeURIComponent(url.replace(/[?#].*$/, '')).replace(/^\//, ''));
    } catch {
      file = url;
    }
    if (has.has(file)) continue;
    const absolute = image
      ? `https://raw.githubusercontent.com/${repo ?? '<owner>/<name>'}/main/${file}`
      : `https://github.com/${repo ?? '<owner>/<name>'}/blob/main/${file}`;
    problem(
      'package page',
      `README.md:${line} ${image ? 'shows' : 'links'} ${url}, which the tarball does not hold: dead on npm. Use ${absolute}${url.includes('#') ? url.slice(url.indexOf('#')) : ''}.`,
    );
  }
  return links;
}

async function checkConsumer(c, tarball, dir) {
  const home = path.join(dir, c.name);
  const nodeModules = path.join(home, 'node_modules');
  fs.mkdirSync(path.join(nodeModules, pkg.name), { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', path.join(nodeModules, pkg.name), '--strip-components=1']);
  const peers = new Set([...BASE_PEERS, ...ENTRY_POINTS.flatMap((e) => e.peers), ...TOOLING, ...dependencies()]);
  if (c.pgTypes) peers.add('@types/pg');
  for (const name of peers) linkPackage(nodeModules, name);
  fs.writeFileSync(
    path.join(home, 'package.json'),
    JSON.stringify({ name: `consumer-${c.name}`, private: true, type: c.type }, null, 2),
  );
  fs.writeFileSync(path.join(home, 'tsconfig.json'), JSON.stringify(tsconfig(c), null, 2));
  fs.writeFileSync(path.join(home, 'index.ts'), consumerSource(c));
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await execFile(process.execPath, [tsc, '-p', home], { cwd: home, maxBuffer: 16 << 20 });
  } catch (err) {
    const source = consumerSource(c).split('\n');
    // Each error in the consumer's own file with its line, and the comment above it that says why it is there.
    const out = (`${err.stdout ?? ''}${err.stderr ?? ''}`.trim() || err.message).replace(/^index\.ts\((\d+),.*$/gm, (line, n) => {
      const above = source[n - 2]?.trim().startsWith('//') ? `\n  | ${source[n - 2].trim()}` : '';
      return `${line}${above}\n  | ${source[n - 1].trim()}`;
    });
    problem(
      `consumer ${c.name}`,
      `tsc (moduleResolution ${c.moduleResolution}, module ${c.module}, "type": "${c.type}") failed:\n${indent(out)}`,
    );
  }
}

/**
 * Every command of package.json's "bin" runs from an install: linked into node_modules/.bin and
 * made executable as npm install does, run by its shebang with --help (no database needed).
 */
async function checkBins(dir) {
  const home = path.join(dir, 'node16-cjs');
  for (const [name, file] of Object.entries(pkg.bin ?? {})) {
    const target = path.join(home, 'node_modules', pkg.name, file);
    const link = path.join(home, 'node_modules', '.bin', name);
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.chmodSync(target, 0o755);
    fs.symlinkSync(path.relative(path.dirname(link), target), link);
    try {
      const { stdout } = await execFile(link, ['--help'], { cwd: home });
      if (!stdout.includes(`Usage: ${name} `)) problem('bin', `${name} --help printed no usage:\n${indent(stdout.trim())}`);
    } catch (err) {
      problem('bin', `${name} (${file}) does not run from an install:\n${indent((err.stderr || err.message).trim())}`);
    }
  }
}

/** Every entry point loads with require() and with import(), from a consumer's folder. */
async function checkRuntime(dir) {
  const home = path.join(dir, 'node16-cjs');
  const names = ENTRY_POINTS.map(importName);
  const cjs = `for (const n of ${JSON.stringify(names)}) require(n);`;
  const esm = `for (const n of ${JSON.stringify(names)}) await import(n);`;
  for (const [label, args] of [
    ['require()', ['-e', cjs]],
    ['import()', ['--input-type=module', '-e', esm]],
  ]) {
    try {
      await execFile(process.execPath, args, { cwd: home });
    } catch (err) {
      problem('runtime', `${label} of the entry points failed:\n${indent((err.stderr || err.message).trim())}`);
    }
  }
}

async function runTool(label, bin, args) {
  try {
    const { stdout } = await execFile(process.execPath, [path.join(root, 'node_modules', ...bin), ...args], {
      cwd: root,
      maxBuffer: 16 << 20,
    });
    return stdout;
  } catch (err) {
    problem(label, `failed:\n${indent(`${err.stdout ?? ''}${err.stderr ?? ''}`.trim() || err.message)}`);
    return null;
  }
}

const indent = (s) => String(s).replace(/^/gm, '    ');

/** Runs `fns` at most `n` at a time (the machine has 2 cores). */
async function pool(n, fns) {
  const queue = [...fns];
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (queue.length) await queue.shift()();
    }),
  );
}

async function main() {
  const keep = process.argv.includes('--keep');
  for (const p of packageJsonProblems(pkg)) problem('entry points', p);
  if (!fs.existsSync(path.join(root, 'dist', 'index.js')))
    throw new Error('dist/ is missing: run `npm run build` (npm run check:package does).');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-package-'));
  try {
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }),
    );
    const tarball = path.join(dir, packed.filename);
    const files = packed.files.map((f) => f.path);
    step(`packed ${packed.filename}: ${files.length} files, ${(packed.size / 1024).toFixed(0)} kB`);

    const unpacked = path.join(dir, 'unpacked');
    fs.mkdirSync(unpacked);
    execFileSync('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1']);
    const maps = checkContents(files, unpacked);
    step(`contents checked (${maps} source maps)`);
    const links = checkPackedReadme(unpacked, files, checkMetadata());
    step(`package page checked (package.json's links and keywords, the README's ${links} links)`);
    if (process.argv.includes('--page')) return report();

    await pool(
      2,
      CONSUMERS.map((c) => () => checkConsumer(c, tarball, dir)),
    );
    step(`${CONSUMERS.length} consumer projects type-checked`);
    await checkRuntime(dir);
    step('entry points loaded with require() and import()');
    await checkBins(dir);
    step(`bin ${Object.keys(pkg.bin ?? {}).join(', ')} ran from an install`);

    // --no-definitely-typed: the package ships its own types, and this check must not need the network.
    const attw = await runTool(
      'attw',
      ['@arethetypeswrong', 'cli', 'dist', 'index.js'],
      [tarball, '--no-definitely-typed', '--format', 'ascii'],
    );
    if (attw !== null) step('attw: no problems');
    const publint = await runTool('publint', ['publint', 'src', 'cli.js'], ['--strict', tarball]);
    if (publint !== null) {
      // publint prints suggestions without failing: they are problems here too.
      if (/Suggestions?:|Warnings?:|Errors?:/.test(publint)) problem('publint', publint.trim());
      else step('publint: no problems');
    }
  } finally {
    if (keep) console.log(`[check:package] kept ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  }

  return report();
}

function report() {
  if (problems.length) {
    console.error(`\n[check:package] ${problems.length} problem(s):\n${problems.join('\n')}`);
    return 1;
  }
  step('ok');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error('[check:package] failed:', err);
    process.exit(1);
  },
);
