import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const DIST_INDEX = path.join(ROOT, 'dist', 'index.js');

/** Newest mtime of the files under `dir` whose names end with `ext`. */
function newestMtime(dir: string, ext: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    // test/unit/lint-rules.spec.ts writes two throwaway files into lib/worker for a moment (the
    // cycle rule needs real files): they are not part of the package.
    if (entry.name.startsWith('__lint_probe')) continue;
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p, ext));
    else if (entry.name.endsWith(ext)) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * Child processes started by tests (test/fixtures/) run the built package in dist/, the test
 * process runs lib/: throws unless both are the same code.
 */
export function assertBuilt(): void {
  if (!fs.existsSync(DIST_INDEX)) {
    throw new Error(
      `${path.relative(ROOT, DIST_INDEX)} is missing: the child processes of this test run the built package. ` +
        'Run `npm run build` first (`npm test` does).',
    );
  }
  const lib = newestMtime(path.join(ROOT, 'lib'), '.ts');
  const dist = newestMtime(path.join(ROOT, 'dist'), '.js');
  if (lib > dist) {
    throw new Error(
      'dist/ is older than lib/ (a source file changed after the last build): the child processes would run ' +
        'stale code. Run `npm run build` first (`npm test` does).',
    );
  }
}
