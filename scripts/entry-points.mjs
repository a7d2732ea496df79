// The package's entry points: the one list that package.json's `exports` and `typesVersions`, and
// the package check's consumer projects (scripts/check-package.mjs), are made from. Adding one is
// one line here, next to its lib/<dir>/index.ts; `npm run build` then rewrites package.json.
//
//   node scripts/entry-points.mjs           rewrites package.json's exports and typesVersions
//   node scripts/entry-points.mjs --check   exits 1 if package.json disagrees with this list
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `subpath` as in package.json exports; `dir` the folder under lib/ (and dist/) holding its
 * index.ts; `peers` the optional peer dependencies it needs on top of the main entry point's.
 */
export const ENTRY_POINTS = [
  { subpath: '.', dir: '', peers: [] },
  { subpath: './health', dir: 'health', peers: ['@nestjs/terminus'] },
  { subpath: './metrics', dir: 'metrics', peers: ['prom-client'] },
  { subpath: './dashboard', dir: 'dashboard', peers: [] },
  { subpath: './testing', dir: 'testing', peers: [] },
];

const dist = (e, ext) => `./dist/${e.dir ? `${e.dir}/` : ''}index.${ext}`;

/** package.json's `exports`: types first, as TypeScript requires of the conditions' order. */
export function exportsField() {
  const field = {};
  for (const e of ENTRY_POINTS) field[e.subpath] = { types: dist(e, 'd.ts'), default: dist(e, 'js') };
  field['./package.json'] = './package.json';
  return field;
}

/**
 * package.json's `typesVersions`: how TypeScript's `moduleResolution: node10` (which ignores
 * `exports`) finds the subpaths' types. Node's require() reads `exports` for the code.
 */
export function typesVersionsField() {
  const paths = {};
  for (const e of ENTRY_POINTS) if (e.subpath !== '.') paths[e.subpath.slice(2)] = [dist(e, 'd.ts').slice(2)];
  return { '*': paths };
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The differences between package.json and this list, as sentences (empty when they agree). */
export function packageJsonProblems(pkg) {
  const problems = [];
  const want = { exports: exportsField(), typesVersions: typesVersionsField() };
  for (const [field, value] of Object.entries(want)) {
    if (JSON.stringify(pkg[field]) !== JSON.stringify(value)) {
      problems.push(
        `package.json "${field}" does not match scripts/entry-points.mjs: run \`node scripts/entry-points.mjs\` ` +
          `(or npm run build). Expected ${JSON.stringify(value)}, found ${JSON.stringify(pkg[field])}.`,
      );
    }
  }
  if (pkg.main !== dist(ENTRY_POINTS[0], 'js').slice(2))
    problems.push(`package.json "main" should be ${dist(ENTRY_POINTS[0], 'js').slice(2)}.`);
  if (pkg.types !== dist(ENTRY_POINTS[0], 'd.ts').slice(2))
    problems.push(`package.json "types" should be ${dist(ENTRY_POINTS[0], 'd.ts').slice(2)}.`);
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = join(root, 'package.json');
  const text = readFileSync(file, 'utf8');
  const pkg = JSON.parse(text);
  if (process.argv.includes('--check')) {
    const problems = packageJsonProblems(pkg);
    for (const p of problems) console.error(p);
    process.exit(problems.length ? 1 : 0);
  }
  pkg.exports = exportsField();
  pkg.typesVersions = typesVersionsField();
  const next = JSON.stringify(pkg, null, 2) + '\n';
  if (next !== text) writeFileSync(file, next);
}
