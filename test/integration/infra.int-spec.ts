import { Client } from 'pg';
import { createTestDatabase, TestDatabase, waitFor } from '../support/database';

async function query<T extends object>(url: string, sql: string): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

async function databaseExists(db: TestDatabase): Promise<boolean> {
  const admin = process.env.PGQUEUE_TEST_URL || process.env.DATABASE_URL!;
  const client = new Client({ connectionString: admin });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.name]);
    return rowCount === 1;
  } finally {
    await client.end();
  }
}

describe('test infrastructure', () => {
  it('creates a real, supported PostgreSQL database and drops it', async () => {
    const db = await createTestDatabase();
    try {
      expect(db.name).toMatch(/^pgq_t_[a-z0-9_]+$/);
      const [row] = await query<{ one: number; current_database: string; version: number }>(
        db.url,
        `SELECT 1 AS one, current_database(), current_setting('server_version_num')::int AS version`,
      );
      expect(row.one).toBe(1);
      expect(row.current_database).toBe(db.name);
      expect(row.version).toBeGreaterThanOrEqual(140000);
    } finally {
      await db.drop();
    }
    expect(await databaseExists(db)).toBe(false);
    await db.drop(); // idempotent
  });

  it('drop() succeeds while connections are still open (WITH FORCE)', async () => {
    const db = await createTestDatabase();
    const client = new Client({ connectionString: db.url });
    client.on('error', () => undefined); // the server terminates this connection
    await client.connect();
    await db.drop();
    expect(await databaseExists(db)).toBe(false);
    await client.end().catch(() => undefined);
  });

  it('gives every call its own database', async () => {
    const [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    try {
      expect(a.name).not.toBe(b.name);
      expect(a.url).not.toBe(b.url);
      await query(a.url, 'CREATE TABLE only_in_a (id int)');
      const rows = await query<{ t: string | null }>(b.url, `SELECT to_regclass('only_in_a')::text AS t`);
      expect(rows[0].t).toBeNull();
    } finally {
      await Promise.all([a.drop(), b.drop()]);
    }
  });
});

describe('waitFor', () => {
  it('resolves as soon as the predicate holds', async () => {
    let calls = 0;
    await waitFor(() => ++calls >= 3, { timeoutMs: 1000, intervalMs: 1 });
    expect(calls).toBe(3);
  });

  it('gives up at its deadline with a descriptive error including the last failure', async () => {
    let state = 'idle';
    let calls = 0;
    // It rejects (rather than retrying until jest's own timeout), after retrying more than once.
    await expect(
      waitFor(
        () => {
          calls++;
          state = 'still idle';
          throw new Error('boom');
        },
        { timeoutMs: 100, intervalMs: 10, message: () => `job to complete (state: ${state})` },
      ),
    ).rejects.toThrow(/timed out after \d+ ms \(\d+ attempts\): job to complete \(state: still idle\); last attempt threw: boom/);
    expect(calls).toBeGreaterThan(1);
  });
});
