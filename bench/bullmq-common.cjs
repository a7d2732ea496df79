'use strict';
// The BullMQ peers of the benchmark: BullMQ 6.7 on PostgreSQL (createPostgresBackend) and on
// Redis, loaded from bench/peers (bench/peers/package.json, installed on demand by run.mjs: never
// a dependency of the package, npm ci or npm test). Shared by bullmq-worker.cjs and
// bullmq-producer.cjs. Every BullMQ option is left at its default except the connection, the
// worker's concurrency (10, as for every contender) and, on Redis, a key prefix per run (the
// PostgreSQL runs each have a fresh database instead).

const path = require('node:path');

const peersDir = path.join(__dirname, 'peers');
const bullmq = require(require.resolve('bullmq', { paths: [peersDir] }));

/** The queue every workload uses (as the library's and the raw loop's). */
const QUEUE = 'bench';

/**
 * The constructor options and the backend factory of one role: `backend` 'pg' (the run's
 * database, a connection string, migrated by the setup role) or 'redis' (127.0.0.1:6379 unless
 * BENCH_REDIS_URL, keys under `prefix`).
 */
function backendArgs({ backend, url, prefix }, { migrate = false } = {}) {
  if (backend === 'pg') {
    // migrate: only the setup role; BullMQ's default is to check the schema, not migrate it.
    return {
      opts: { connection: migrate ? { connectionString: url, migrate: true } : url },
      factory: bullmq.createPostgresBackend,
    };
  }
  const u = new URL(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379');
  return {
    opts: { connection: { host: u.hostname, port: Number(u.port || 6379) }, prefix },
    factory: undefined,
  };
}

module.exports = {
  bullmq,
  QUEUE,
  backendArgs,
  version: require(require.resolve('bullmq/package.json', { paths: [peersDir] })).version,
};
