import { randomBytes } from 'crypto';
import { Client, type Pool } from 'pg';
import { PgQueueError } from '../../lib';
import { HistoryPartitions } from '../../lib/db/history/partitions';
import { JobStore } from '../../lib/db/job-store';
import { migrate } from '../../lib/db/migrator';
import { migrationLockKey } from '../../lib/db/lock-holders';
import { lockKey } from '../../lib/db/transaction';
import { testAdminUrl, testPool, useTestDatabase } from '../support/database';

// Advisory locks live in one namespace per database that every role able to connect may take.
// A session of another role (here "neighbour", a plain LOGIN role with no right on the queue's
// schema) holding one of the queue's keys used to hang the boot (migration lock), stop a limited
// queue's claims with no bound (claim lock), and silently skip maintenance and the history
// upkeep. Each case must now fail loudly, or warn, naming the holder.

describe('advisory locks held by a session of another role', () => {
  const t = useTestDatabase();
  const role = `pgq_neighbour_${randomBytes(4).toString('hex')}`;
  let admin: Client;
  let neighbour: Client;
  let pool: Pool;

  beforeAll(async () => {
    admin = new Client({ connectionString: testAdminUrl() });
    await admin.connect();
    // A password, for a server that asks for one (the embedded one, SCRAM).
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}'`);
    pool = testPool(t.db.url, 4);
    await migrate(pool, 'pgqueue');
  });
  beforeEach(async () => {
    const u = new URL(t.db.url);
    u.username = role;
    u.password = role;
    neighbour = new Client({ connectionString: u.toString(), application_name: 'nosy-script' });
    neighbour.on('error', () => undefined);
    await neighbour.connect();
  });
  afterEach(async () => {
    await neighbour.end().catch(() => undefined);
  });
  afterAll(async () => {
    await pool.end();
    // Its sessions are gone (afterEach), so the role can go; nothing of it is left in the database.
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.end();
  });

  async function hold(key: string): Promise<void> {
    await neighbour.query('BEGIN');
    await neighbour.query('SELECT pg_advisory_xact_lock($1::bigint)', [key]);
  }
  const store = (warn?: (m: string) => void) =>
    new JobStore(pool, {
      schema: 'pgqueue',
      retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
      asyncCommit: true,
      preparedStatements: false,
      warn,
    });
  const holderNamed = new RegExp(`pid \\d+ \\(role "${role}", application "nosy-script"`);

  it('the migration fails within its lock timeout, naming the holder, instead of hanging the boot', async () => {
    await hold(migrationLockKey('pgqueue'));
    const err = await migrate(pool, 'pgqueue', 300).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueError);
    expect((err as Error).message).toMatch(/migration lock was not had within 300 ms/);
    expect((err as Error).message).toMatch(holderNamed);
    // Once the neighbour lets go, the boot's migration goes through.
    await neighbour.query('ROLLBACK');
    await expect(migrate(pool, 'pgqueue', 300)).resolves.toEqual([]);
  });

  it("a limited queue's claim fails after its lock timeout, naming the holder, and claims again once it is gone", async () => {
    const s = store();
    await pool.query(`INSERT INTO pgqueue.jobs (queue, name, payload) VALUES ('lim', 'x', '{}')`);
    await hold(lockKey('nestjs-pg-queue:limits:pgqueue:lim'));
    const limits = { globalConcurrency: 1, limiter: null };
    const err = await s.claimLimited('lim', 1, 'w:1', 30_000, limits).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueError);
    expect((err as Error).message).toMatch(/Claims of queue "lim" waited \d+ ms for the queue's claim lock/);
    expect((err as Error).message).toMatch(holderNamed);
    await neighbour.query('ROLLBACK');
    const { rows } = await s.claimLimited('lim', 1, 'w:1', 30_000, limits);
    expect(rows).toHaveLength(1); // nothing was lost: the job waited and is claimed now
  });

  it('maintenance skipped because of a foreign holder warns, naming it, once per minute', async () => {
    const warnings: string[] = [];
    const s = store((m) => warnings.push(m));
    await hold(lockKey('nestjs-pg-queue:maintenance:pgqueue'));
    expect(await s.maintain(100)).toBeNull();
    expect(await s.maintain(100)).toBeNull();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/the maintenance lock is held by/);
    expect(warnings[0]).toMatch(holderNamed);
  });

  it('maintenance held by another node of this app (same role and application) is the election: no warning', async () => {
    const warnings: string[] = [];
    const s = store((m) => warnings.push(m));
    const node = new Client({ connectionString: t.db.url });
    await node.connect();
    try {
      await node.query('BEGIN');
      await node.query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey('nestjs-pg-queue:maintenance:pgqueue')]);
      expect(await s.maintain(100)).toBeNull();
      expect(warnings).toEqual([]);
    } finally {
      await node.end();
    }
  });

  it('the history upkeep skipped because of a foreign holder warns, naming it', async () => {
    const warnings: string[] = [];
    const parts = new HistoryPartitions(pool, 'pgqueue', 86_400_000, (m) => warnings.push(m));
    await hold(lockKey('nestjs-pg-queue:history:pgqueue'));
    // A day ahead of the database clock: a partition is due, and its step finds the lock taken.
    const r = await parts.runOnce(86_400_000, Date.now() + 5 * 86_400_000);
    expect(r.created).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/the history lock is held by/);
    expect(warnings[0]).toMatch(holderNamed);
  });
});
