/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  rootDir: __dirname,
  testMatch: [
    '<rootDir>/test/unit/**/*.spec.ts',
    '<rootDir>/test/integration/**/*.int-spec.ts',
    '<rootDir>/test/e2e/**/*.e2e-spec.ts',
    // The dashboard in Debian's Chromium (playwright-core), against the built package: `npm test` builds first.
    '<rootDir>/test/browser/**/*.browser-spec.ts',
  ],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
  modulePathIgnorePatterns: ['<rootDir>/dist/'],
  testTimeout: 30000,
};
