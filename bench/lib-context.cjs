'use strict';
// The library side of the benchmark: the BUILT package (../dist) in a plain NestJS application
// context, as an app runs it in production. Shared by lib-worker.cjs and lib-producer.cjs.

require('reflect-metadata');
const path = require('node:path');

// `dist` in the role's argument (run.mjs --ab=DIR): another build, for interleaved A/B runs.
const distDir = (() => {
  try {
    const d = JSON.parse(process.argv[2] ?? '{}').dist;
    if (d) return path.resolve(d);
  } catch {
    // roleArgs() reports a bad argument
  }
  return path.resolve(__dirname, '..', 'dist');
})();
let pkg;
try {
  pkg = require(distDir);
} catch (err) {
  process.stderr.write(
    `bench: cannot load the built package from ${distDir}: ${err.message}\n` +
      'Run `npm run build` first (`npm run bench` does it for you).\n',
  );
  process.exit(2);
}
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');

/** The queue every workload uses. */
const QUEUE = 'bench';

/**
 * Boots an application context with PgQueueModule.forRoot({ connection, ...libOptions }) and
 * queue 'bench'. `libOptions` comes from `--lib-options` (default: none, so the library's
 * defaults apply). Only warnings and errors are logged: a per-job log line would be measured too.
 * With `dashboard`, an HTTP app (Express) instead, mounting PgQueueDashboardModule at /queues
 * (public: the bench is its only client), listening on 127.0.0.1 on a free port.
 */
async function bootApp({ url, workers, concurrency = 10, libOptions = {}, providers = [], dashboard = false }) {
  class BenchAppModule {}
  Module({
    imports: [
      pkg.PgQueueModule.forRoot({ connection: url, workers, ...libOptions }),
      pkg.PgQueueModule.registerQueue({ name: QUEUE, concurrency }),
      ...(dashboard ? [require(path.join(distDir, 'dashboard')).PgQueueDashboardModule.register({ public: true })] : []),
    ],
    providers,
  })(BenchAppModule);
  const appOptions = { logger: ['warn', 'error', 'fatal'], abortOnError: false };
  if (!dashboard) return NestFactory.createApplicationContext(BenchAppModule, appOptions);
  const app = await NestFactory.create(BenchAppModule, appOptions);
  await app.listen(0, '127.0.0.1');
  return app;
}

module.exports = { pkg, bootApp, QUEUE };
