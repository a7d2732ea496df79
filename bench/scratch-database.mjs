// What the side scripts of bench/ (groups.mjs, group-enqueue.mjs) share: their numeric options,
// and a database of their own on DATABASE_URL's server (it must allow CREATE DATABASE) or on a
// throwaway embedded PostgreSQL with default durability, as bench/run.mjs does.

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
