'use strict';
// The library side of the benchmark: the BUILT package (../dist) in a plain NestJS application
// context, as an app runs it in production. Shared by lib-worker.cjs and lib-producer.cjs.

require('reflect-metadata');
const path = require('node:path');

const distDir = path.resolve(__dirname, '..', 'dist');
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
 */
async function bootApp({ url, workers, concurrency = 10, libOptions = {}, providers = [] }) {
  class BenchAppModule {}
  Module({
    imports: [
      pkg.PgQueueModule.forRoot({ connection: url, workers, ...libOptions }),
      pkg.PgQueueModule.registerQueue({ name: QUEUE, concurrency }),
    ],
    providers,
  })(BenchAppModule);
  return NestFactory.createApplicationContext(BenchAppModule, {
    logger: ['warn', 'error', 'fatal'],
    abortOnError: false,
  });
}

module.exports = { pkg, bootApp, QUEUE };
