import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import {
  PgQueueConfigError,
  PgQueueError,
  PgQueueModule,
  PgQueuePayloadError,
  Process,
  Processor,
  QueueService,
  type Job,
} from '../../lib';
import { latestVersion } from '../../lib/db/migrator';
import { bootApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/database';

@Processor('mail')
class MailProcessor {
  @Process('send')
  send(_job: Job) {}
}

@Processor('mail')
class DuplicateMailProcessor {
  @Process('send')
  sendAgain(_job: Job) {}
}

@Processor('unregistered')
class OrphanProcessor {
  @Process()
  any(_job: Job) {}
}

describe('bad input gets a clear error, early', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('at boot', () => {
    it.each([
      [{ schema: 'Bad-Schema' }, /Invalid schema "Bad-Schema".*lower-case letters/],
      [{ schema: 'x; DROP TABLE users' }, /Invalid schema/],
      [{ pollIntervalMs: -5 }, /Invalid pollIntervalMs: -5\. Use a whole number from 10/],
      [{ poolSize: 1.5 }, /Invalid poolSize/],
      [{ leaseMs: 3000, heartbeatIntervalMs: 5000 }, /heartbeatIntervalMs \(5000\) must be shorter than leaseMs \(3000\)/],
      [{ pollIntervalMS: 100 }, /Unknown PgQueueModule option\(s\): pollIntervalMS/],
      [{ defaultJobOptions: { attempts: 0 } }, /Invalid defaultJobOptions\.attempts: 0/],
      [{ defaultJobOptions: { backoff: { type: 'linear' } } }, /Invalid defaultJobOptions\.backoff/],
    ])('rejects module options %j', async (bad, message) => {
      const err = await bootApp({ options: { connection: db.url, ...(bad as object) } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PgQueueConfigError);
      expect((err as Error).message).toMatch(message);
    });

    it('rejects an invalid queue name when the module graph is declared', () => {
      expect(() => PgQueueModule.registerQueue({ name: 'bad name!' })).toThrow(/Invalid queue name "bad name!"/);
      expect(() => PgQueueModule.registerQueue({ name: 'ok', concurrency: 0 })).toThrow(/concurrency: 0/);
      expect(() => Processor('')).toThrow(PgQueueConfigError);
    });

    it('fails when no connection can be found, saying what to pass', async () => {
      const err = await bootApp({ options: {} }).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(/has no database connection\. Pass `connection`/);
    });

    it('fails when the database does not answer, naming it without the password', async () => {
      const err = await bootApp({ options: { connection: 'postgres://postgres:secret@127.0.0.1:1/nowhere' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PgQueueError);
      expect((err as Error).message).toMatch(/cannot use the database at postgres:\/\/\*\*\*@127\.0\.0\.1:1\/nowhere/);
      expect((err as Error).message).not.toContain('secret');
    });

    it('fails with migrate: false on an unmigrated database, saying how to migrate', async () => {
      const err = await bootApp({ options: { connection: db.url, migrate: false, schema: 'never_migrated' } }).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(new RegExp(`Schema "never_migrated" is at version 0; .* needs ${latestVersion()}\\. Set migrate: true`));
    });

    it('fails on a processor whose queue is not registered', async () => {
      await expect(bootApp({ options: { connection: db.url }, providers: [OrphanProcessor] })).rejects.toThrow(/queue "unregistered" is not registered\. Add PgQueueModule\.registerQueue\(\{ name: 'unregistered' \}\)/);
    });

    it('fails on two handlers for one job name', async () => {
      await expect(
        bootApp({ options: { connection: db.url }, queues: [{ name: 'mail' }], providers: [MailProcessor, DuplicateMailProcessor] }),
      ).rejects.toThrow(/Job "send" of queue "mail" has two @Process handlers/);
    });
  });

  describe('at enqueue', () => {
    let app: INestApplicationContext;
    let queues: QueueService;

    beforeAll(async () => {
      app = await bootApp({ options: { connection: db.url, maxPayloadBytes: 1000, workers: false }, queues: [{ name: 'mail' }] });
      await app.init();
      queues = app.get(QueueService);
    });
    afterAll(async () => {
      await app?.close();
    });

    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;

    it.each([
      ['a BigInt', { id: 10n }, /cannot be stored as JSON: .*BigInt/],
      ['a cycle', cyclic, /cannot be stored as JSON: .*circular/i],
      ['a function', () => 1, /is not JSON data/],
      ['a NUL character', { s: 'a\u0000b' }, /contains a NUL character/],
      ['too many bytes', { s: 'x'.repeat(2000) }, /over maxPayloadBytes \(1000\)/],
    ])('rejects a payload with %s and stores nothing', async (_what, payload, message) => {
      const err = await queues.add('mail', 'send', payload).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PgQueuePayloadError);
      expect((err as Error).message).toMatch(message);
      const c = new Client({ connectionString: db.url });
      await c.connect();
      const { rows } = await c.query('SELECT count(*)::int AS n FROM pgqueue.jobs');
      await c.end();
      expect(rows[0].n).toBe(0);
    });

    it('rejects bad job options and bad names at enqueue', async () => {
      await expect(queues.add('mail', 'send', {}, { attempts: -1 })).rejects.toThrow(/attempts: -1/);
      await expect(queues.add('mail', 'send', {}, { delayMs: -10 })).rejects.toThrow(/delayMs must be a number >= 0/);
      await expect(queues.add('mail', 'send', {}, { delayMs: 1, runAt: new Date() })).rejects.toThrow(/runAt or delayMs, not both/);
      await expect(queues.add('mail', 'send', {}, { runAt: new Date('nope') })).rejects.toThrow(/runAt must be a valid Date/);
      await expect(queues.add('mail', '', {})).rejects.toThrow(/Invalid job name/);
      await expect(queues.add('no such queue!', 'send', {})).rejects.toThrow(/Invalid queue name/);
    });

    it('in addBulk, one bad payload rejects the whole call before anything is stored', async () => {
      await expect(
        queues.addBulk('mail', [
          { name: 'send', payload: { ok: 1 } },
          { name: 'send', payload: { bad: 1n } },
        ]),
      ).rejects.toBeInstanceOf(PgQueuePayloadError);
      expect(await queues.getJob('1')).toBeNull();
    });

    it('getJob with an id that is not a number answers null rather than a SQL error', async () => {
      expect(await queues.getJob("1; DROP TABLE x")).toBeNull();
    });
  });
});
