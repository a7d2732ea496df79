// The docs site: the API reference from the declarations (TypeDoc, as markdown, into docs/api/),
// then the VitePress build of docs/ into docs/.vitepress/dist (docs/.vitepress/config.mts).
//
//   node scripts/build-docs.mjs              typedoc + vitepress build (`npm run docs:build`)
//   node scripts/build-docs.mjs --if-stale   the same, unless the built site is newer than every
//                                            file of docs/, lib/ and this script, and none was added
//                                            or removed since (the browser test builds this way, so
//                                            `npm test` on a fresh clone works)
//   node scripts/build-docs.mjs --api-only   only the reference (`npm run docs:dev` starts with it)
//
// Fails on any TypeDoc warning (a public type that references one the reference does not show, a
// broken {@link}) and on any dead link between pages (VitePress' `ignoreDeadLinks: false`).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const docs = path.join(root, 'docs');
const apiOut = path.join(docs, 'api');
const dist = path.join(docs, '.vitepress', 'dist');
/** Written last, so a build that failed half-way is stale; holds the list of input files. */
const stamp = path.join(dist, '.built');

/** The package's entry points, as scripts/entry-points.mjs lists them: one module of the reference each. */
const { ENTRY_POINTS } = await import('./entry-points.mjs');
const entryPoints = ENTRY_POINTS.map((e) => path.join('lib', e.dir, 'index.ts'));

/**
 * Internal types that public signatures mention (constructors Nest calls, the dashboard service's
 * store). They are not part of the public surface, so the reference names them without a page;
 * any other unexported type a public export references fails the build: export it, or add it
 * here with the reason.
 */
const INTERNAL_TYPES = [
  'PgQueueRuntime', // DashboardService's constructor: Nest injects it
  'PgQueueReadApi', // PgQueueHealthIndicator's constructor: Nest injects it
  'ResolvedDashboardOptions', // DashboardService's constructor: the options after defaults
  'ResolvedJobDefaults', // DashboardService.queue(): the queue's options after defaults
  'DashboardReads', // DashboardService.store: the SQL reads behind the dashboard's API
  // DashboardService's reads: the dashboard's HTTP API (docs/dashboard-api.md) is the contract.
  'JobListQuery',
  'DashboardJob',
  'DashboardFlow',
  'PgQueryable', // PgPoolConfig.Client: pg's Client class, spelt structurally (pg is a peer)
  'PgPoolClient', // TransactionalStepContext.client: a client of pg's Pool, spelt structurally (pg is a peer)
  'QueryRunnerLike', // PgQueueMigrationClass: TypeORM's QueryRunner, spelt structurally (typeorm is optional)
];

/** The files under `dir` that `keep` accepts, skipping the paths in `skip`. */
function filesUnder(dir, { skip = [], keep = () => true } = {}) {
  const out = [];
  const walk = (d) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      if (skip.includes(p)) continue;
      if (entry.isDirectory()) walk(p);
      else if (keep(entry.name)) out.push(p);
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out;
}

/** What the site is built from; the stamp keeps the list, so a deleted or added file makes it stale too. */
function inputs() {
  return [
    ...filesUnder(docs, { skip: [apiOut, path.join(docs, '.vitepress', 'cache'), dist] }),
    // Source files only: test/unit/lint-rules.spec.ts writes and removes probe files in lib/worker
    // during `npm test`, which must not make the site stale.
    ...filesUnder(path.join(root, 'lib'), { keep: (name) => name.endsWith('.ts') && !name.startsWith('__lint_probe') }),
    fileURLToPath(import.meta.url),
    path.join(root, 'package-lock.json'),
  ]
    .map((f) => path.relative(root, f))
    .sort();
}

function isStale() {
  if (!fs.existsSync(stamp)) return true;
  const built = fs.statSync(stamp).mtimeMs;
  const files = inputs();
  if (fs.readFileSync(stamp, 'utf8') !== files.join('\n')) return true;
  return files.some((f) => fs.statSync(path.join(root, f)).mtimeMs > built);
}

async function buildReference() {
  const td = await import('typedoc');
  const app = await td.Application.bootstrapWithPlugins({
    name: 'nestjs-pg-queue',
    entryPoints,
    tsconfig: path.join(root, 'tsconfig.build.json'),
    plugin: ['typedoc-plugin-markdown', 'typedoc-vitepress-theme'],
    out: apiOut,
    docsRoot: docs,
    readme: 'none',
    excludeInternal: true,
    excludePrivate: true,
    excludeProtected: true,
    intentionallyNotExported: INTERNAL_TYPES,
    hidePageHeader: true,
    hideBreadcrumbs: true,
    useCodeBlocks: true,
    // "Defined in" links to the source on GitHub, on main (a clone need not have a remote). {path}
    // is relative to the entry points' common folder, lib/ (a basePath would rename the modules).
    disableGit: true,
    gitRevision: 'main',
    sourceLinkTemplate: 'https://github.com/nestjs-pg-queue/nestjs-pg-queue/blob/{gitRevision}/lib/{path}#L{line}',
    // typedoc-vitepress-theme's sidebar file, which docs/.vitepress/config.mts reads.
    sidebar: { autoConfiguration: true, format: 'vitepress', pretty: false, collapsed: true },
    logLevel: 'Warn',
  });
  const project = await app.convert();
  if (!project) throw new Error('TypeDoc could not convert the entry points (see the errors above)');
  app.validate(project);
  if (app.logger.hasErrors() || app.logger.hasWarnings()) {
    throw new Error(
      'TypeDoc reported the warnings above: export a type a public signature references from its entry point ' +
        '(or list it in INTERNAL_TYPES, scripts/build-docs.mjs, with the reason), and fix broken {@link} tags',
    );
  }
  await app.generateOutputs(project);
  if (app.logger.hasErrors() || app.logger.hasWarnings()) throw new Error('TypeDoc reported the warnings above');
}

async function main() {
  const args = process.argv.slice(2);
  if (args.includes('--if-stale') && !isStale()) {
    console.log(`[docs] ${path.relative(root, dist)} is newer than docs/ and lib/: not rebuilt`);
    return;
  }
  const started = Date.now();
  await buildReference();
  console.log(`[docs] API reference in ${path.relative(root, apiOut)} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  if (args.includes('--api-only')) return;
  fs.rmSync(stamp, { force: true });
  const { build } = await import('vitepress');
  await build(docs);
  fs.writeFileSync(stamp, inputs().join('\n'));
  console.log(`[docs] site in ${path.relative(root, dist)} (${((Date.now() - started) / 1000).toFixed(1)} s in all)`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`[docs] failed: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  },
);
