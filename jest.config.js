const pgBouncerMode = process.env.PGQUEUE_TEST_PGBOUNCER;
// PGQUEUE_TEST_SCOPE=server: only the suites whose outcome depends on the PostgreSQL server they
// run against (integration and e2e). CI runs everything once on the embedded server, then this
// scope on the Testcontainers and the system server: the unit tests touch no server, and the
// browser tests drive the dashboard and docs pages whose reads the integration suite covers.
const serverScope = process.env.PGQUEUE_TEST_SCOPE === 'server';
if (process.env.PGQUEUE_TEST_SCOPE && !serverScope) {
  throw new Error(`PGQUEUE_TEST_SCOPE must be "server" or unset, not "${process.env.PGQUEUE_TEST_SCOPE}"`);
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
