// What the side scripts of bench/ (groups.mjs, group-enqueue.mjs) share: their numeric options,
// and a database of their own on DATABASE_URL's server (it must allow CREATE DATABASE) or on a
// throwaway embedded PostgreSQL with default durability, as bench/run.mjs does.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres } from '../scripts/pg-server.mjs';

/** `--name=N` from the command line as a number, else `dflt`. */
export function numberArg(name, dflt) {
  const v = process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  return v === undefined ? dflt : Number(v);
}

/** Runs `fn(url)` on a new database `${prefix}_${pid}`, dropped afterwards (and the embedded server stopped). */
export async function withScratchDatabase(prefix, fn) {
  const server = process.env.DATABASE_URL ? null : await startPostgres({ durable: true });
  const adminUrl = process.env.DATABASE_URL ?? server.url;
  const name = `${prefix}_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  try {
    return await fn(url.toString());
  } finally {
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
    await server?.stop();
  }
}

/** The median of `xs` (the upper one of an even count). */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * `rounds` rounds of `measure(url, v)` over the variants `vs` (each with a `key`), in order in the
 * odd rounds and reversed in the even ones, so no variant always runs first or last; each figure is
 * logged to stderr under `tag`. Answers the figures by key, and the server's version.
 */
export async function interleavedRounds(tag, url, vs, measure, rounds) {
  const results = new Map(vs.map((v) => [v.key, []]));
  for (let r = 0; r < rounds; r++) {
    for (const v of r % 2 === 0 ? vs : [...vs].reverse()) {
      const us = await measure(url, v);
      results.get(v.key).push(us);
      process.stderr.write(`[${tag}] round ${r + 1}/${rounds} ${v.key}: ${us.toFixed(2)} us/job\n`);
    }
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const version = (await admin.query('SHOW server_version')).rows[0].server_version;
  await admin.end();
  return { results, version };
}

/**
 * A require of the built package's modules: `lib('db/migrator')`. From `process.env[envVar]` when
 * set (another build's dist/, for an A/B between commits), else this checkout's dist/.
 */
export function distRequire(envVar) {
  const req = createRequire(import.meta.url);
  const dist = process.env[envVar] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist');
  return (module) => req(path.join(dist, ...module.split('/')));
}

/** Runs `fn(client, pool)` on a client and a one-connection pool of `url`, both closed afterwards. */
export async function withSession(url, fn) {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client, pool);
  } finally {
    await client.end();
    await pool.end();
  }
}

/**
 * Prints the variants' medians (min-max) as a Markdown table, each against the median of the
 * variant `baseOf(v)` names (nothing for a base itself).
 */
export function printVariants(header, vs, results, baseOf) {
  console.log(`| ${header.join(' | ')} |`);
  console.log('| --- | ---: | ---: |');
  for (const v of vs) {
    const xs = results.get(v.key);
    const m = median(xs);
    const baseKey = baseOf(v);
    const base = baseKey === v.key ? null : median(results.get(baseKey));
    const delta = base === null ? '' : `${m - base >= 0 ? '+' : ''}${(m - base).toFixed(2)}`;
    console.log(`| ${v.label} | ${m.toFixed(2)} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}) | ${delta} |`);
  }
}

/** Runs `fn(url)` on a scratch database (withScratchDatabase), then exits: 0, or 1 with the error. */
export function runScratch(prefix, fn) {
  withScratchDatabase(prefix, fn).then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
