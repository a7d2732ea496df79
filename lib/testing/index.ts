/**
 * The `nestjs-pg-queue/testing` entry point, for the test suites of apps that use the queue:
 * a database for the run and per test file, and the app's real workers driven from the test.
 * Nothing in `lib/index.ts` may import from here.
 */
export { PgQueueTestingModule, type PgQueueTestingOptions } from './pg-queue-testing.module';
export { PgQueueTester, type PgQueueDrainOptions, type PgQueueTestOutcome } from './pg-queue-tester';
export {
  startTestPostgres,
  createTestDatabase,
  testServerUrl,
  pgQueueGlobalSetup,
  pgQueueGlobalTeardown,
  dockerAnswers,
  DEFAULT_TEST_IMAGE,
  type TestPostgres,
  type TestPostgresOptions,
  type TestPostgresSource,
  type TestDatabase,
} from './test-postgres';
