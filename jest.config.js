const pgBouncerMode = process.env.PGQUEUE_TEST_PGBOUNCER;
// PGQUEUE_TEST_SCOPE=server: only the suites whose outcome depends on the PostgreSQL server they
// run against (integration and e2e). CI runs everything once on the embedded server, then this
// scope on the system server: the unit tests touch no server, and the browser tests drive the
// dashboard and docs pages whose reads the integration suite covers.
// PGQUEUE_TEST_SCOPE=harness: the files below, for a way of starting the server whose PostgreSQL
// another run already covers (CI's Testcontainers run, on an image built from the system
// server's own files): each exercises a part of the harness the others do not.
const HARNESS_FILES = [
  'integration/infra.int-spec.ts', // a database per file, created and dropped on that server
  'integration/migrations.int-spec.ts', // every migration, applied on it
  'integration/wakeup.int-spec.ts', // LISTEN/NOTIFY across its connections
  'integration/multi-process.int-spec.ts', // child processes handed its address
  'integration/backend-kill.int-spec.ts', // pg_terminate_backend and the reconnect
  'integration/testing-database.int-spec.ts', // PgQueueTester's own throwaway databases
  'integration/multi-database.int-spec.ts', // a second database on it
  'e2e/orders.e2e-spec.ts', // the sample app over HTTP
];
const scope = process.env.PGQUEUE_TEST_SCOPE;
const serverScope = scope === 'server';
const harnessScope = scope === 'harness';
if (scope && !serverScope && !harnessScope) {
  throw new Error(`PGQUEUE_TEST_SCOPE must be "server", "harness" or unset, not "${scope}"`);
}

/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  rootDir: __dirname,
  // Through PgBouncer (scripts/test.mjs, PGQUEUE_TEST_PGBOUNCER): the integration suite less the
  // files test/pgbouncer/suite.js names with their reasons, plus the PgBouncer-only tests.
  testMatch: pgBouncerMode
    ? ['<rootDir>/test/integration/**/*.int-spec.ts', '<rootDir>/test/pgbouncer/**/*.pgb-spec.ts']
    : harnessScope
      ? HARNESS_FILES.map((f) => `<rootDir>/test/${f}`)
      : serverScope
        ? ['<rootDir>/test/integration/**/*.int-spec.ts', '<rootDir>/test/e2e/**/*.e2e-spec.ts']
        : [
            '<rootDir>/test/unit/**/*.spec.ts',
            '<rootDir>/test/integration/**/*.int-spec.ts',
            '<rootDir>/test/e2e/**/*.e2e-spec.ts',
            // The dashboard in Debian's Chromium (playwright-core), against the built package: `npm test` builds first;
            // the docs site (docs-site.browser-spec.ts builds it when older than docs/ and lib/).
            '<rootDir>/test/browser/**/*.browser-spec.ts',
          ],
  testPathIgnorePatterns: [
    '/node_modules/',
    ...(pgBouncerMode
      ? Object.keys(require('./test/pgbouncer/suite').excluded(pgBouncerMode)).map(
          (f) => `/test/integration/${f.replace(/\./g, '\\.')}$`,
        )
      : []),
  ],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
  // The root afterAll that drops each file's test databases once the file's own afterAll hooks
  // have closed its apps (test/support/after-file.ts).
  setupFilesAfterEnv: ['<rootDir>/test/support/after-file-setup.ts'],
  modulePathIgnorePatterns: ['<rootDir>/dist/'],
  testTimeout: 30000,
};
