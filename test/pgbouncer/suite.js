'use strict';
// What `npm test` runs through PgBouncer (PGQUEUE_TEST_PGBOUNCER=direct-listen|poll-only): every
// test/integration file, plus test/pgbouncer/*.pgb-spec.ts, except the files named here, each with
// the reason. jest.config.js reads it; scripts/test.mjs prints it, so nothing is left out silently.
// A file listed under `notRouted` would run exactly as in the plain run (its queue does not take
// its connection from test/support/app.ts bootApp), so running it again would prove nothing.

/** @type {Record<string, string>} */
const notRouted = {
  'connections.int-spec.ts': 'the queue takes its settings from a TypeORM DataSource; it counts pool and LISTEN connections on the server',
  'transactional.int-spec.ts': "the queue takes its settings from a TypeORM DataSource and enqueues in the app's transactions",
  'cls-transactional.int-spec.ts': 'the queue takes its settings from a TypeORM DataSource (enqueue in @Transactional())',
  'module.int-spec.ts': 'forRoot/forRootAsync wiring with its own modules and a TypeORM DataSource, not bootApp',
  'multi-process.int-spec.ts': 'the workers are child processes (test/fixtures/worker-process.js) with their own options',
  'backend-kill.int-spec.ts': 'the worker is a child process with its own options, and it kills that process\'s server backends by pid',
  'readme-app.int-spec.ts': "the README's example app, with its own module",
  'optional-peers.int-spec.ts': 'child processes that load entry points; no queue SQL',
  'infra.int-spec.ts': 'tests the test harness (createTestDatabase, waitFor), no queue',
};

/** Files that cannot pass through PgBouncer in a mode by nature, with the reason. */
/** @type {Record<'direct-listen' | 'poll-only', Record<string, string>>} */
const byNature = {
  'direct-listen': {},
  'poll-only': {
    'wakeup.int-spec.ts': 'it tests the LISTEN/NOTIFY wake-up itself (60 s polls); poll-only has its own test in it, run in the plain suite',
  },
};

/** The files a mode leaves out, with the reasons. */
function excluded(mode) {
  return { ...notRouted, ...(byNature[mode] ?? {}) };
}

module.exports = { notRouted, byNature, excluded };
