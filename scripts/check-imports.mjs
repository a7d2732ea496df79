// The import graph of lib/, type-only imports and re-exports included: prints every import cycle
// and every import a folder's layer does not allow (eslint.config.mjs, MAY_IMPORT), and exits 1
// on any. ESLint's import-x/no-cycle skips `import type`, so a cycle held together by types
// (db/job-store.ts <-> db/flow-store.ts, before the reshape) passed lint; TypeScript's own
// scanner sees every form.
//
//   node scripts/check-imports.mjs [--root DIR]   (DIR holds lib/; default: this repository)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { MAY_IMPORT } from '../eslint.config.mjs';

const EXTENSIONS = ['.ts', '.tsx'];

/** Every .ts/.tsx file under `dir` (declaration files aside), as absolute paths. */
function sourceFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourceFiles(p);
    return EXTENSIONS.includes(path.extname(e.name)) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** The file a relative specifier names (`./x`, `./x.js`, `./dir` with index), or null (not ours). */
function resolve(from, specifier) {
  if (!specifier.startsWith('.')) return null;
  const base = path.resolve(path.dirname(from), specifier.replace(/\.js$/, ''));
  const candidates = [base, ...EXTENSIONS.map((e) => base + e), ...EXTENSIONS.map((e) => path.join(base, 'index' + e))];
  return candidates.find((c) => fs.existsSync(c) && fs.statSync(c).isFile()) ?? null;
}

/**
 * The graph: file -> files it imports. `ts.preProcessFile` lists `import`, `import type`,
 * `export ... from`, `import x = require()`, `import('...')` (types too) and, with the last flag,
 * `require()`; each counts here, whether or not it survives compilation.
 */
export function importGraph(libDir) {
  const graph = new Map();
  const unresolved = [];
  for (const file of sourceFiles(libDir)) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets = new Set();
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = resolve(file, fileName);
      if (target) targets.add(target);
      else unresolved.push(`${file}: '${fileName}'`);
    }
    graph.set(file, [...targets].sort());
  }
  return { graph, unresolved };
}

/** The layer of a file: its folder under lib/, or 'index' for lib/index.ts. */
export function layerOf(libDir, file) {
  const rel = path.relative(libDir, file).split(path.sep);
  return rel.length === 1 ? (rel[0] === 'index.ts' ? 'index' : null) : rel[0];
}

/** The strongly connected components of more than one file (or a file importing itself): Tarjan. */
function cyclicComponents(graph) {
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const out = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** A shortest cycle through `start` inside `members` (breadth first), as a list of files. */
function shortestCycle(graph, members, start) {
  const inside = new Set(members);
  const prev = new Map([[start, null]]);
  const queue = [start];
  while (queue.length) {
    const v = queue.shift();
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const cycle = [];
        for (let u = v; u !== null; u = prev.get(u)) cycle.unshift(u);
        return [...cycle, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/**
 * The findings: `cycles` (each a file list that ends where it starts; every file of a cyclic
 * component lies on at least one printed cycle) and `layers` (imports MAY_IMPORT does not allow).
 */
export function checkImports(root) {
  const libDir = path.join(root, 'lib');
  const { graph, unresolved } = importGraph(libDir);
  const rel = (f) => path.relative(root, f).split(path.sep).join('/');
  const cycles = [];
  for (const scc of cyclicComponents(graph)) {
    const covered = new Set();
    for (const start of scc) {
      if (covered.has(start)) continue;
      const cycle = shortestCycle(graph, scc, start);
      cycle.forEach((f) => covered.add(f));
      cycles.push(cycle.map(rel));
    }
  }
  const layers = [];
  for (const [file, targets] of graph) {
    const from = layerOf(libDir, file);
    for (const target of targets) {
      const to = layerOf(libDir, target);
      if (from === to) continue;
      const allowed = MAY_IMPORT[from];
      if (allowed === undefined) {
        layers.push(`${rel(file)} is in no layer: add lib/${from ?? path.basename(file)} to MAY_IMPORT in eslint.config.mjs`);
        break;
      }
      if (!allowed.includes(to)) {
        layers.push(
          `${rel(file)} (${from}) imports ${rel(target)} (${to}): ${from} may import ` +
            `${allowed.length ? allowed.join(', ') : 'nothing else in lib'}`,
        );
      }
    }
  }
  return { files: graph.size, cycles, layers, unresolved: unresolved.map((u) => path.relative(root, u)) };
}

function main() {
  const at = process.argv.indexOf('--root');
  const root = at > 0 ? path.resolve(process.argv[at + 1]) : path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
  const { files, cycles, layers, unresolved } = checkImports(root);
  for (const c of cycles) console.log(`cycle: ${c.join(' -> ')}`);
  for (const l of layers) console.log(`layer: ${l}`);
  for (const u of unresolved) console.log(`unresolved: ${u}`);
  const problems = cycles.length + layers.length + unresolved.length;
  console.log(
    problems
      ? `check-imports: ${cycles.length} cycle(s), ${layers.length} layer violation(s), ${unresolved.length} unresolved import(s) in ${files} files of lib/`
      : `check-imports: ${files} files of lib/, no cycle, every import within its layer`,
  );
  process.exitCode = problems ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) main();
