'use strict';
// What `npm test` runs through PgBouncer (PGQUEUE_TEST_PGBOUNCER=direct-listen|poll-only): every
// test/integration file, plus test/pgbouncer/*.pgb-spec.ts, except the files named here, each with
// the reason. jest.config.js reads it; scripts/test.mjs prints it, so nothing is left out silently.
// A file listed under `notRouted` would run exactly as in the plain run (its queue does not take
// its connection from test/support/app.ts bootApp), so running it again would prove nothing.

/** @type {Record<string, string>} */
const notRouted = {
  'connections.int-spec.ts':
    'the queue takes its settings from a TypeORM DataSource; it counts pool and LISTEN connections on the server',
  'transactional.int-spec.ts': "the queue takes its settings from a TypeORM DataSource and enqueues in the app's transactions",
  'cls-transactional.int-spec.ts': 'the queue takes its settings from a TypeORM DataSource (enqueue in @Transactional())',
  'module.int-spec.ts': 'forRoot/forRootAsync wiring with its own modules and a TypeORM DataSource, not bootApp',
  'multi-process.int-spec.ts': 'the workers are child processes (test/fixtures/worker-process.js) with their own options',
  'job-schedulers-multi-process.int-spec.ts':
    'the workers and the producer are child processes (test/fixtures/scheduler-process.js) with their own options',
  'backend-kill.int-spec.ts':
    "the worker is a child process with its own options, and it kills that process's server backends by pid",
  'readme-app.int-spec.ts': "the README's example app, with its own module",
  'optional-peers.int-spec.ts': 'child processes that load entry points; no queue SQL',
  'infra.int-spec.ts': 'tests the test harness (createTestDatabase, waitFor), no queue',
  'history-migration.int-spec.ts':
    'the migration and the partition steps run on its own direct pool (no bootApp), on a history of 1,000,000 rows',
  'coalesced-add.int-spec.ts': "its JobStore runs on the test database's direct pool (useTestDatabase), not through bootApp",
  'dashboard-api.int-spec.ts': 'its HTTP apps take forRoot options as given (test/support/dashboard-app.ts), not through bootApp',
  'testing-database.int-spec.ts':
    'nestjs-pg-queue/testing: test servers and databases (startTestPostgres, createTestDatabase), no queue through bootApp',
  'testing-fake-timers.int-spec.ts':
    "nestjs-pg-queue/testing's PgQueueTestingModule with its own forRoot({ connection: db.url }), not bootApp",
  'testing-tester.int-spec.ts':
    "nestjs-pg-queue/testing's PgQueueTester with its own forRoot({ connection: db.url }), not bootApp",
  'readme-testing.int-spec.ts': "the README's test files run by jest in a child process, with the README's own module",
  'register-queue-async.int-spec.ts':
    'registerQueueAsync wiring with its own modules and forRoot({ connection: db.url }), not bootApp',
  'global-concurrency.int-spec.ts':
    "the workers are child processes (test/fixtures/gated-worker-process.js) on a direct connection, hearing the '!limits' hint by LISTEN; the test process only enqueues",
  'bulk-crash.int-spec.ts':
    'the batched call under test runs in a child process (test/fixtures/bulk-process.js) on its own direct connection, which the test kills',
};

/** Files that cannot pass through PgBouncer in a mode by nature, with the reason. */
/** @type {Record<'direct-listen' | 'poll-only', Record<string, string>>} */
const byNature = {
  'direct-listen': {
    'runtime-role.int-spec.ts':
      "it logs in as a migration role and a runtime role it creates during the test, which the run's PgBouncer cannot authenticate (its auth file lists the suite's own user); its subject is privileges, run in the plain suite",
  },
  'poll-only': {
    'spoofed-notify.int-spec.ts': 'it tests what a forged NOTIFY can do to a listening node; poll-only has no listener',
    'queue-events.int-spec.ts':
      'it tests the cross-process events, which need LISTEN (queue.events() is refused in poll-only mode); waitForJob without LISTEN has its own test in queue-events-modes',
    'queue-events-processes.int-spec.ts':
      'its producer app hears the worker process through @OnQueueEvent, which needs LISTEN (refused at boot in poll-only mode)',
    'search-path.int-spec.ts':
      "it waits for the node's listener before it runs the statements; run in the plain suite and through PgBouncer with LISTEN direct",
    'runtime-role.int-spec.ts':
      "it logs in as a migration role and a runtime role it creates during the test, which the run's PgBouncer cannot authenticate (its auth file lists the suite's own user); its subject is privileges, run in the plain suite",
    'wakeup.int-spec.ts':
      'it tests the LISTEN/NOTIFY wake-up itself (60 s polls); poll-only has its own test in it, run in the plain suite',
    'delayed-wakeup.int-spec.ts':
      'it tests the wake-up timer set from NOTIFY payloads and on the listener connecting (5 min polls); poll-only finds a delayed job at its next poll',
    'find-change.int-spec.ts':
      "its workers poll once a minute so that a promoted job running at once proves promote's NOTIFY, and its other tests seed history through those workers; run in the plain suite and through PgBouncer with LISTEN direct",
  },
};

/**
 * Single tests that cannot pass in a mode by nature, by file and test title, with the reason.
 * scripts/test.mjs leaves them out with jest's --testNamePattern (a title that no longer matches
 * simply runs again, and fails loudly if it still cannot pass); jest reports them as skipped.
 */
/** @type {Record<'direct-listen' | 'poll-only', Record<string, Record<string, string>>>} */
const testsByNature = {
  'direct-listen': {},
  'poll-only': {
    'batch-handlers.int-spec.ts': {
      'a thrown error fails every job of the batch, each with its own attempts':
        'it also checks the cross-process failed/retrying events of a batch, which need LISTEN (queue.events() is refused in poll-only mode); the batch outcomes themselves are checked by the other tests of the file',
    },
    'steps-counts.int-spec.ts': {
      'publishes a parked queue event per park, confirmed against the row':
        'it listens for the parked queue event, which needs LISTEN (queue.events() is refused in poll-only mode); the parked counts are checked by the other test of the file',
    },
    'queue-events-modes.int-spec.ts': {
      'events: { publish: false } sends no NOTIFY (a control NOTIFY sent after the job ended arrives alone)':
        'its app waits with LISTEN on; the poll-only wait has its own test in the file',
      'publishes (a control: with publishing on, the same completion is heard on the channel)': 'it boots an app with LISTEN',
      'awaits a flow parent: its release and its failure by a child are heard as events (migration 0016)':
        'it subscribes to queue.events() (refused in poll-only mode) to hear the flow trigger',
      '@OnQueueEvent hears a release, and a failure passed up two levels (each parent failed by its child)':
        'its app has @OnQueueEvent methods, refused at boot in poll-only mode',
      'an iterator read at once keeps up with a burst larger than its buffer (no lagged)':
        'it subscribes to queue.events(), refused in poll-only mode',
      'a burst past the backlog is dropped and reported as lagged, with the count and ids; nothing else is lost':
        'it LISTENs with the events hub; poll-only has none',
    },
    'cancel-pause.int-spec.ts': {
      'a running job on another node gets its signal fired with CancelJobError and ends cancelled, not retried':
        "the cancel reaches the running node by NOTIFY; without LISTEN it comes with the next heartbeat (leaseMs / 3, 10 s), after the test's 5 s wait",
      'a handler that completes despite the cancel wins: the job is completed':
        'the same: its handler waits for the cancel signal, which comes with the next heartbeat',
    },
    'shutdown.int-spec.ts': {
      'a job handed back at shutdown wakes another worker at once, by NOTIFY, not at its poll':
        'it tests the NOTIFY wake-up (10 min polls)',
    },
    'bulk-change.int-spec.ts': {
      'cancels waiting jobs by filter (to history) and signals running ones, as cancel(id)':
        "cancelJobs reaches the running jobs' node by NOTIFY; without LISTEN it comes with the next heartbeat (leaseMs / 3, 10 s), after the test's 5 s wait",
    },
    'metrics.int-spec.ts': {
      'counts enqueued, completed, retried, failed and stalled jobs, times handlers and waits, and reports the listener':
        'it waits for listener_connected = 1; poll-only has no listener',
    },
    'run-at.int-spec.ts': {
      'a job enqueued with runAt runs at that time, not before (by the database clock)':
        'the NOTIFY carries the due time (60 s polls); poll-only finds the job at its next poll',
    },
    'pause.int-spec.ts': {
      'hands back the jobs a node had prefetched, and they do not run when its slot frees':
        "pause and resume reach other nodes by NOTIFY (60 s polls); it waits for each node's listener",
      'holds across a node restart and for a node that boots while the queue is paused; resume runs the jobs':
        "the same: it waits for each node's listener (60 s polls)",
    },
  },
};

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A --testNamePattern that runs every test but the mode's `testsByNature`, or null when there are none. */
function namePattern(mode) {
  const titles = Object.values(testsByNature[mode] ?? {}).flatMap((tests) => Object.keys(tests));
  return titles.length ? `^(?!.*(?:${titles.map(escapeRegExp).join('|')}))` : null;
}

/** The files a mode leaves out, with the reasons. */
function excluded(mode) {
  return { ...notRouted, ...(byNature[mode] ?? {}) };
}

module.exports = { notRouted, byNature, testsByNature, excluded, namePattern };
