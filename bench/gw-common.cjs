'use strict';
// graphile-worker, the peer measured in the same run (the pinned devDependency, the newest that
// runs on Node 20: 0.18 needs Node 22). Every setting is its default except `concurrency: 10`
// (its default is 1; every library in the bench gets 10 handler slots) and a logger that drops
// debug and info lines (it logs one "Completed task" info line per job; the library logs only
// warnings and errors too). Its table, its preload and its quiet logger live here.

const gw = require('graphile-worker');

/** The table that holds graphile-worker's jobs (a completed job is deleted from it). */
const TABLE = 'graphile_worker._private_jobs';

/** Only warnings and errors, to stderr. */
const logger = new gw.Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

/** $1 how many: a backlog of no-op jobs through its own add_jobs(), in one statement. */
const preload = `
  SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
    SELECT ROW('noop', json_build_object('i', g), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
    FROM generate_series(1, $1) AS g))`;

module.exports = { gw, TABLE, logger, preload, version: require('graphile-worker/package.json').version };
