import { Client, type Pool } from 'pg';
import type { PgQueueConnectionOptions, PgQueueModuleOptions } from '../../lib';
import type { PgPoolConfig } from '../../lib/core/pg-types';
import { testAdminUrl } from './database';

/**
 * How the queue's connections run in this test process, set by `npm test` (scripts/test.mjs):
 * - unset: straight to the test server;
 * - `direct-listen`: the pool through PgBouncer in transaction mode (`preparedStatements: false`),
 *   LISTEN on a direct `listenConnection`;
 * - `poll-only`: the pool through PgBouncer, no LISTEN at all (`listen: false`).
 */
export type PgBouncerMode = 'direct-listen' | 'poll-only';

export function pgBouncerMode(): PgBouncerMode | undefined {
  const mode = process.env.PGQUEUE_TEST_PGBOUNCER;
  if (!mode) return undefined;
  if (mode !== 'direct-listen' && mode !== 'poll-only') {
    throw new Error(`PGQUEUE_TEST_PGBOUNCER must be direct-listen or poll-only, not "${mode}"`);
  }
  return mode;
}

function sameServer(a: URL, b: URL): boolean {
  return a.hostname === b.hostname && (a.port || '5432') === (b.port || '5432');
}

/**
 * `url` through the PgBouncer of this run (PGQUEUE_TEST_PGBOUNCER_URL, or `bouncerUrl`), when it
 * points at the test server; any other URL (a TCP proxy, a port nobody listens on) is kept.
 */
export function throughPgBouncer(url: string, bouncerUrl = process.env.PGQUEUE_TEST_PGBOUNCER_URL): string {
  if (!bouncerUrl) throw new Error('PGQUEUE_TEST_PGBOUNCER_URL is not set: run through `npm test` with PGQUEUE_TEST_PGBOUNCER');
  const u = new URL(url);
  if (!sameServer(u, new URL(testAdminUrl()))) return url;
  const b = new URL(bouncerUrl);
  u.hostname = b.hostname;
  u.port = b.port;
  return u.toString();
}

function routed(c: string | PgPoolConfig): string | PgPoolConfig | undefined {
  if (typeof c === 'string') {
    const through = throughPgBouncer(c);
    return through === c ? undefined : through;
  }
  if (c.connectionString && c.host === undefined && c.port === undefined) {
    const through = throughPgBouncer(c.connectionString);
    return through === c.connectionString ? undefined : { ...c, connectionString: through };
  }
  return undefined;
}

/**
 * The module options every test's forRoot gets (test/support/app.ts bootApp applies it). Without
 * a PgBouncer mode they are returned unchanged. With one, a `connection` to the test server goes
 * through PgBouncer with `preparedStatements: false`, and LISTEN goes to the server directly
 * (`direct-listen`) or is off (`poll-only`). What a test sets itself is kept: its own
 * `preparedStatements`, `listen` or `listenConnection`, and a connection that is not the test
 * server's (a proxy, a dead port) or is a DataSource.
 */
export function pooledOptions(options: PgQueueModuleOptions): PgQueueModuleOptions {
  const mode = pgBouncerMode();
  if (!mode) return options;
  const out = pooledConnection(options, mode);
  if (!options.connections) return out;
  // Each named connection on the test server goes through PgBouncer the same way. One on another
  // server (a second throwaway one) stays direct, with the test's own settings, not the
  // preparedStatements: false and (poll-only) listen: false that routing gave the top level.
  const connections: Record<string, PgQueueConnectionOptions> = {};
  for (const [name, entry] of Object.entries(options.connections)) {
    const pooled = pooledConnection(entry, mode);
    connections[name] =
      pooled !== entry
        ? pooled
        : {
            ...entry,
            preparedStatements: entry.preparedStatements ?? options.preparedStatements ?? true,
            listen: entry.listen ?? options.listen ?? true,
          };
  }
  return { ...out, connections };
}

/** One connection's settings (top-level or an entry of `connections`) through PgBouncer, when on the test server. */
function pooledConnection<T extends PgQueueConnectionOptions>(options: T, mode: PgBouncerMode): T {
  if (options.connection === undefined) return options;
  const connection = routed(options.connection);
  if (connection === undefined) return options;
  const out: T = { ...options, connection, preparedStatements: options.preparedStatements ?? false };
  const ownListen = options.listen !== undefined || options.listenConnection !== undefined;
  if (!ownListen) {
    if (mode === 'direct-listen') out.listenConnection = options.connection;
    else out.listen = false;
  }
  return out;
}

/** The admin consoles of this run's PgBouncers (the main one, and the one with a pool of 2). */
function bouncerAdminUrls(): string[] {
  return [process.env.PGQUEUE_TEST_PGBOUNCER_URL, process.env.PGQUEUE_TEST_PGBOUNCER_TIGHT_URL]
    .filter((u): u is string => Boolean(u))
    .map((u) => {
      const a = new URL(u);
      a.pathname = '/pgbouncer';
      return a.toString();
    });
}

/** Runs one statement on a PgBouncer admin console (simple query protocol only). */
export async function bouncerAdmin<T>(adminUrl: string, sql: string): Promise<T[]> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return (await c.query(sql)).rows as T[];
  } finally {
    await c.end();
  }
}

/**
 * Drops a test database the way DROP ... WITH (FORCE) does straight on the server: PgBouncer's
 * `KILL` first ends every client connection to it (a queue still closing gets its errors at once,
 * instead of waiting in PgBouncer for a login to a database that is gone), then `RESUME` lets
 * later connection attempts fail fast. Without a PgBouncer mode, just `drop()`.
 */
export async function dropThroughPgBouncers(name: string, drop: () => Promise<void>): Promise<void> {
  const admins = pgBouncerMode() ? bouncerAdminUrls() : [];
  const quoted = `"${name.replace(/"/g, '""')}"`;
  for (const a of admins) await bouncerAdmin(a, `KILL ${quoted}`).catch(() => undefined);
  try {
    await drop();
  } finally {
    for (const a of admins) await bouncerAdmin(a, `RESUME ${quoted}`).catch(() => undefined);
  }
}

/**
 * Connections a closed app may have left to database `pool` is on: its backends on the server
 * (`application_name` nestjs-pg-queue...) and, through PgBouncer, its client connections there.
 * PgBouncer's own server connections are not counted: keeping those open is its job.
 */
export async function queueConnectionsLeft(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ pid: number; db: string }>(
    `SELECT pid, current_database() AS db FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'nestjs-pg-queue%'`,
  );
  if (!pgBouncerMode()) return rows.length;
  const db = rows[0]?.db ?? (await pool.query<{ db: string }>('SELECT current_database() AS db')).rows[0].db;
  let left = rows.length;
  for (const admin of bouncerAdminUrls()) {
    const servers = await bouncerAdmin<{ remote_pid: number }>(admin, 'SHOW SERVERS');
    const bouncerPids = new Set(servers.map((s) => Number(s.remote_pid)));
    left -= rows.filter((r) => bouncerPids.has(r.pid)).length;
    left += (await bouncerAdmin<{ database: string }>(admin, 'SHOW CLIENTS')).filter((c) => c.database === db).length;
  }
  return left;
}
