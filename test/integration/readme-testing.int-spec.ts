import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';
import { assertBuilt } from '../support/built';
import { testAdminUrl } from '../support/database';
import { COMPILER_OPTIONS, exampleAppFiles, ROOT } from '../support/readme';

/**
 * The docs/testing.md example, run as a user runs it: the getting-started example's src/ and
 * the test/ files written to a folder as they stand, compiled, `nestjs-pg-queue` resolving to
 * this package's build (a node_modules link), then jest on them in a child process, with the
 * page's globalSetup/globalTeardown. Its tests must pass.
 */
describe('the docs/testing.md example, run with jest', () => {
  let dir = '';

  beforeAll(() => {
    assertBuilt();
    dir = mkdtempSync(join(ROOT, 'test', '.readme-testing-'));
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(ROOT, join(dir, 'node_modules', 'nestjs-pg-queue'), 'dir');
    for (const b of exampleAppFiles()) {
      const out = ts.transpileModule(b.code, { compilerOptions: { ...COMPILER_OPTIONS, noEmit: false, paths: undefined } });
      const path = join(dir, b.file!.replace(/\.ts$/, '.js'));
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, out.outputText);
    }
    // The page's jest.config.js, for the compiled files (ts-jest has nothing left to do).
    writeFileSync(
      join(dir, 'jest.config.js'),
      `module.exports = { rootDir: __dirname, testEnvironment: 'node', testMatch: ['<rootDir>/test/**/*.spec.js'],
        globalSetup: '<rootDir>/test/global-setup.js', globalTeardown: '<rootDir>/test/global-teardown.js',
        moduleNameMapper: { '^(\\\\.{1,2}/.*)\\\\.js$': '$1' } };`,
    );
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('its tests pass', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: testAdminUrl() };
    delete env.PGQUEUE_TEST_URL; // the page's globalSetup sets it
    const jest = require.resolve('jest/bin/jest');
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve) =>
      execFile(
        process.execPath,
        [jest, '--config', join(dir, 'jest.config.js'), '--ci', '--runInBand'],
        { cwd: dir, env, timeout: 120_000 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
      ),
    );
    expect(output).toMatch(/Tests:\s+2 passed, 2 total/);
    expect(code).toBe(0);
  }, 150_000);
});
