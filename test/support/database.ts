import { randomBytes } from 'crypto';
import { Client, Pool } from 'pg';
import { afterFile } from './after-file';
import { dropThroughPgBouncers } from './pgbouncer';

export interface TestDatabase {
  /** Connection URL of the fresh, empty database. */
  url: string;
  /** Database name (`pgq_t_...`). */
  name: string;
  /** DROP DATABASE ... WITH (FORCE) (through PgBouncer: its connections to it too); safe to call more than once. */
  drop(): Promise<void>;
}

/**
 * Admin URL of the test server: PGQUEUE_TEST_URL (set by `npm test`), else
 * DATABASE_URL (so plain `npx jest` works against a server you run yourself).
 */
export function testAdminUrl(): string {
  const url = process.env.PGQUEUE_TEST_URL || process.env.DATABASE_URL;
  if (!url) {
    throw new Error(
      'No test PostgreSQL: run tests through `npm test` (it starts an embedded server), ' +
        'or set DATABASE_URL to a server where this user may CREATE DATABASE.',
    );
  }
  return url;
}

function urlFor(adminUrl: string, database: string): string {
  const u = new URL(adminUrl);
  u.pathname = '/' + encodeURIComponent(database);
  return u.toString();
}

async function withAdmin<T>(adminUrl: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates a uniquely named, empty database on the test server. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = testAdminUrl();
  const runId = (process.env.PGQUEUE_TEST_RUN_ID ?? '').replace(/[^a-z0-9]/gi, '').toLowerCase();
  const name = `pgq_t_${runId ? runId + '_' : ''}${randomBytes(6).toString('hex')}`;
  await withAdmin(adminUrl, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));

  let dropped: Promise<void> | undefined;
  return {
    url: urlFor(adminUrl, name),
    name,
    drop() {
      dropped ??= dropThroughPgBouncers(name, () =>
        withAdmin(adminUrl, async (c) => {
          await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
        }),
      );
      return dropped;
    },
  };
}

export interface WaitForOptions {
  /** Give up after this long. Default 5000. */
  timeoutMs?: number;
  /** Pause between attempts. Default 25. */
  intervalMs?: number;
  /** What was being waited for; a function is evaluated on timeout (to include current state). */
  message?: string | (() => string | Promise<string>);
}

/**
 * Polls `predicate` until it returns true, or throws a descriptive error once
 * `timeoutMs` has passed. Errors thrown by the predicate count as "not yet";
 * the last one is reported on timeout.
 */
export async function waitFor(
  predicate: () => Promise<boolean> | boolean,
  { timeoutMs = 5000, intervalMs = 25, message }: WaitForOptions = {},
): Promise<void> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  let attempts = 0;
  let lastError: unknown;
  for (;;) {
    attempts++;
    try {
      if (await predicate()) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, remaining)));
  }
  let what = 'condition';
  if (typeof message === 'function') {
    try {
      what = await message();
    } catch (err) {
      what = `(message callback failed: ${String(err)})`;
    }
  } else if (message) {
    what = message;
  }
  const last =
    lastError === undefined ? '' : `; last attempt threw: ${lastError instanceof Error ? lastError.message : String(lastError)}`;
  throw new Error(
    `waitFor timed out after ${Date.now() - started} ms (${attempts} attempts): ${what}${last}`,
    lastError === undefined ? undefined : { cause: lastError },
  );
}

/**
 * A fresh database and a small pool on it for the enclosing `describe`, dropped after it.
 * Read `ctx.db` and `ctx.pool` inside tests (they are set in beforeAll).
 */
export function useTestDatabase(): { readonly db: TestDatabase; readonly pool: Pool } {
  const ctx = {} as { db: TestDatabase; pool: Pool };
  beforeAll(async () => {
    ctx.db = await createTestDatabase();
    ctx.pool = testPool(ctx.db.url, 2);
  });
  afterFile(async () => {
    await ctx.pool?.end();
    await ctx.db?.drop();
  });
  return ctx;
}

/**
 * A pg Pool for a test's own queries. pg-pool's end() resolves before its idle clients have
 * closed, so the DROP DATABASE ... WITH (FORCE) that follows can terminate one of them; without
 * an 'error' listener that teardown race would crash the test file (seen once in CI).
 */
export function testPool(url: string, max: number): Pool {
  const pool = new Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}
