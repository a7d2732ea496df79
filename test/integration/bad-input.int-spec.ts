import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import {
  InjectQueue,
  OnQueueEvent,
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
      [{ pollIntervalMs: -5 }, /Invalid pollIntervalMs: -5 \(it is below 10\)\. Use a whole number from 10/],
      [{ poolSize: 1.5 }, /Invalid poolSize/],
      [{ leaseMs: 3000, heartbeatIntervalMs: 5000 }, /heartbeatIntervalMs \(5000\) must be shorter than leaseMs \(3000\)/],
      [{ pollIntervalMS: 100 }, /Unknown option\(s\) in PgQueueModule options: "pollIntervalMS" \(use pollIntervalMs\)/],
      // Unknown keys in nested options and in defaultJobOptions are refused the same way, naming ours.
      [{ retention: { completed: 1000 } }, /Unknown option\(s\) in retention: "completed"/],
      [{ removeOnComplete: true }, /"removeOnComplete" \(use retention\.completedMs\)/],
      [{ defaultJobOptions: { delay: 1000 } }, /Unknown option\(s\) in defaultJobOptions: "delay" \(use delayMs/],
      [{ defaultJobOptions: { removeOnFail: 100 } }, /"removeOnFail" \(use the module option retention\.failedMs/],
      [{ defaultJobOptions: { delayMs: 1000 } }, /"delayMs" \(use it per job, in add\(\); a delay is not a default\)/],
      [{ defaultJobOptions: { backoff: 5000 } }, /backoff: 5000\. A backoff is an object: \{ type: 'fixed', delayMs: 5000 \}/],
      [{ defaultJobOptions: { backoff: { type: 'fixed', delay: 500 } } }, /defaultJobOptions\.backoff: "delay" \(use delayMs/],
      // Durations beyond what timers or PostgreSQL hold fail here, saying the range.
      [{ leaseMs: 2 ** 31 }, /Invalid leaseMs: 2147483648 \(it is above 2147483647\)/],
      [{ pollIntervalMs: Infinity }, /Invalid pollIntervalMs: Infinity \(it is not a finite number\)/],
      [{ shutdownTimeoutMs: '10s' }, /Invalid shutdownTimeoutMs: "10s" \(it is a string, not a number\)/],
      [{ cronCatchUpMs: 365 * 86_400_000 }, /Invalid cronCatchUpMs: .*it is above/],
      [
        { defaultJobOptions: { timeoutMs: 2 ** 31 } },
        /Invalid defaultJobOptions\.timeoutMs: 2147483648 \(it is above 2147483647\)/,
      ],
      [
        { defaultJobOptions: { backoff: { type: 'fixed', maxDelayMs: 1e300 } } },
        /backoff\.maxDelayMs: 1e\+300 \(it is above 2147483647\)/,
      ],
      [{ retention: { failedMs: 1e300 } }, /Invalid retention\.failedMs: 1e\+300 \(it is above/],
      [{ defaultJobOptions: { attempts: 0 } }, /Invalid defaultJobOptions\.attempts: 0/],
      [{ defaultJobOptions: { backoff: { type: 'linear' } } }, /Invalid defaultJobOptions\.backoff/],
    ])('rejects module options %j', async (bad, message) => {
      const err = await bootApp({ options: { connection: db.url, ...(bad as object) } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PgQueueConfigError);
      expect((err as Error).message).toMatch(message);
    });

    it('rejects an invalid queue name when the module graph is declared', () => {
      expect(() => PgQueueModule.registerQueue({ name: 'bad name!' })).toThrow(
        /Invalid queue name "bad name!": character " " at index 3 is not allowed/,
      );
      expect(() => PgQueueModule.registerQueue({ name: 'ok', concurrency: 0 })).toThrow(/concurrency: 0/);
      expect(() => Processor('')).toThrow(PgQueueConfigError);
    });

    it('rejects, in every place a queue or job name is given, what PostgreSQL cannot store, saying so', () => {
      const half = '😀'.slice(0, 1);
      expect(() => PgQueueModule.registerQueue({ name: 'a\u0000b' })).toThrow(
        /Invalid queue name "a\\u0000b": it contains a NUL character \(\\u0000\) at index 1/,
      );
      expect(() => Processor(`mail${half}`)).toThrow(/Invalid queue name "mail\\ud83d": it contains a lone UTF-16 surrogate/);
      expect(() => Processor({ name: 'mail', concurency: 2 } as never)).toThrow(/@Processor\(\): unknown option "concurency"/);
      expect(() => InjectQueue(`x${half}`)).toThrow(/lone UTF-16 surrogate/);
      expect(() => OnQueueEvent('failed', { queue: 'q\u0000' })).toThrow(/NUL character/);
      expect(() => Process(`send${half}`)).toThrow(/Invalid job name "send\\ud83d": it contains a lone UTF-16 surrogate/);
      expect(() => Process({ name: 'send', concurrency: 2 } as never)).toThrow(
        /unknown option "concurrency" \(concurrency is per queue/,
      );
      expect(() => PgQueueModule.registerQueue({ name: 'mail', deadLetterQueue: 'dead\u0000' })).toThrow(
        /deadLetterQueue: Invalid queue name .*NUL character/,
      );
      expect(() => PgQueueModule.registerQueue({ name: 'mail', repeat: [{ name: `tick${half}`, cron: '* * * * *' }] })).toThrow(
        /repeat\[0\]: Invalid job name "tick\\ud83d": it contains a lone UTF-16 surrogate/,
      );
      expect(() => PgQueueModule.registerQueue({ name: 'mail', prefix: 'bull' } as never)).toThrow(
        /Unknown option\(s\) in registerQueue\(\{ name: "mail" \}\): "prefix"/,
      );
      expect(() => PgQueueModule.registerQueue({ name: 'mail', limiter: { max: 1, duration: 1000 } } as never)).toThrow(
        /"duration" \(use durationMs/,
      );
      expect(() => PgQueueModule.registerQueue({ name: 'mail', defaultJobOptions: { jobId: 'x' } as never })).toThrow(
        /"jobId" \(use uniqueKey/,
      );
    });

    it('quotes a long name briefly, and says what is actually wrong with it', () => {
      const long = 'q'.repeat(10_000);
      const messageOf = (f: () => unknown) => {
        try {
          f();
        } catch (err) {
          return (err as Error).message;
        }
        throw new Error('did not throw');
      };
      const queue = messageOf(() => PgQueueModule.registerQueue({ name: long }));
      expect(queue).toMatch(
        /^Invalid queue name "q{60}"… \(10000 characters\): it is 10000 characters long, over the limit of 100\./,
      );
      expect(queue.length).toBeLessThan(400);
      const job = messageOf(() => Process('j'.repeat(10_000)));
      expect(job).toMatch(/it is 10000 characters long, over the limit of 200/);
      expect(job.length).toBeLessThan(400);
      // A NUL in a short name is a NUL problem, not a length problem.
      expect(messageOf(() => Process('a\u0000b'))).toBe(
        'Invalid job name "a\\u0000b": it contains a NUL character (\\u0000) at index 1, which PostgreSQL cannot store: remove or encode it. ' +
          'Use a non-empty string of at most 200 characters.',
      );
      expect(messageOf(() => Process(''))).toMatch(/Invalid job name "": it is empty/);
      expect(messageOf(() => Process(42 as never))).toMatch(/Invalid job name 42: expected a string, got number/);
      const option = messageOf(() => PgQueueModule.registerQueue({ name: 'ok', concurrency: 'x'.repeat(10_000) as never }));
      expect(option.length).toBeLessThan(400);
    });

    it('fails when no connection can be found, saying what to pass', async () => {
      const err = await bootApp({ options: {} }).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(/has no database connection\. Pass `connection`/);
    });

    it('fails when the database does not answer, naming it without the password', async () => {
      const err = await bootApp({ options: { connection: 'postgres://postgres:secret@127.0.0.1:1/nowhere' } }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(PgQueueError);
      expect((err as Error).message).toMatch(/cannot connect to PostgreSQL at 127\.0\.0\.1:1: nothing listens there/);
      expect((err as Error).message).not.toContain('secret');
    });

    it('fails with migrate: false on an unmigrated database, saying how to migrate', async () => {
      const err = await bootApp({ options: { connection: db.url, migrate: false, schema: 'never_migrated' } }).catch(
        (e: unknown) => e,
      );
      expect((err as Error).message).toMatch(
        new RegExp(`Schema "never_migrated" is at version 0; .* needs ${latestVersion()}\\. Set migrate: true`),
      );
    });

    it('fails on a processor whose queue is not registered', async () => {
      await expect(bootApp({ options: { connection: db.url }, providers: [OrphanProcessor] })).rejects.toThrow(
        /queue "unregistered" is not registered\. Add PgQueueModule\.registerQueue\(\{ name: 'unregistered' \}\)/,
      );
    });

    it('fails on two handlers for one job name', async () => {
      await expect(
        bootApp({
          options: { connection: db.url },
          queues: [{ name: 'mail' }],
          providers: [MailProcessor, DuplicateMailProcessor],
        }),
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
    const sparse: unknown[] = [1];
    sparse[2] = 3;
    const lazy = {
      get total(): number {
        throw new Error('not loaded');
      },
    };

    async function storedJobs(): Promise<number> {
      const c = new Client({ connectionString: db.url });
      await c.connect();
      try {
        return (await c.query('SELECT count(*)::int AS n FROM pgqueue.jobs')).rows[0].n;
      } finally {
        await c.end();
      }
    }

    // Each of these was stored as something else (or refused by PostgreSQL) before: a function
    // left out, a Map stored as {}, NaN as null, a hole as null, a lone surrogate as an SQL error.
    it.each<[string, unknown, RegExp]>([
      ['a BigInt', { id: 10n }, /cannot be stored as JSON: payload\.id is a BigInt/],
      ['a cycle', cyclic, /cannot be stored as JSON: payload\.self refers back to payload: a cycle/],
      ['a function', () => 1, /cannot be stored as JSON: payload is a function, which JSON leaves out/],
      [
        'a function-valued property',
        { items: [{ price: 1, format: () => '1 EUR' }] },
        /payload\.items\[0\]\.format is a function/,
      ],
      ['a Map', { byId: new Map([[1, 'a']]) }, /payload\.byId is a Map, which JSON stores as \{\}/],
      ['a Set', { tags: new Set(['a']) }, /payload\.tags is a Set/],
      [
        'NaN deep inside',
        { items: [{}, {}, {}, { price: NaN }] },
        /payload\.items\[3\]\.price is NaN, which JSON stores as null/,
      ],
      ['Infinity', { ratio: Infinity }, /payload\.ratio is Infinity/],
      ['a symbol', { kind: Symbol('x') }, /payload\.kind is a symbol/],
      ['a hole in an array', { list: sparse }, /payload\.list\[1\] is a hole in a sparse array/],
      ['undefined in an array', { list: [1, undefined] }, /payload\.list\[1\] is undefined inside an array/],
      ['a Buffer', { file: Buffer.from('hi') }, /payload\.file is a Buffer/],
      ['an Error', { cause: new Error('x') }, /payload\.cause is an Error/],
      ['a boxed string', { s: new String('x') }, /payload\.s is a boxed String/],
      ['an invalid Date', { at: new Date('nope') }, /payload\.at is an invalid Date/],
      ['a RegExp', { pattern: /x/ }, /payload\.pattern is a RegExp/],
      ['a getter that throws', { order: lazy }, /payload\.order\.total cannot be read: its getter threw "not loaded"/],
      ['a NUL character', { s: 'a\u0000b' }, /payload\.s contains a NUL character \(\\u0000\) at index 1/],
      [
        'a lone surrogate',
        { s: 'ok', deep: { text: 'half of 😀'.slice(0, -1) } },
        /payload\.deep\.text contains a lone UTF-16 surrogate/,
      ],
      ['too many bytes', { s: 'x'.repeat(2000) }, /over maxPayloadBytes \(1000\)/],
    ])('rejects a payload with %s and stores nothing', async (_what, payload, message) => {
      const err = await queues.add('mail', 'send', payload).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PgQueuePayloadError);
      expect((err as Error).message).toMatch(message);
      expect(await storedJobs()).toBe(0);
    });

    it('stores the documented JSON conversions as documented: Date as ISO string, undefined left out, toJSON, -0 as 0', async () => {
      class Money {
        constructor(readonly cents: number) {}
        toJSON() {
          return { cents: this.cents, currency: 'EUR' };
        }
      }
      const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
      const job = await queues.add('mail', 'send', { at, skip: undefined, price: new Money(250), zero: -0, [Symbol('meta')]: 1 });
      expect((await queues.getJob(job.id))?.payload).toEqual({
        at: '2026-01-02T03:04:05.000Z',
        price: { cents: 250, currency: 'EUR' },
        zero: 0,
      });
      expect(await queues.getQueue('mail').remove(job.id)).toBe(true);
    });

    it('rejects bad job options and bad names at enqueue', async () => {
      await expect(queues.add('mail', 'send', {}, { attempts: -1 })).rejects.toThrow(/attempts: -1/);
      await expect(queues.add('mail', 'send', {}, { delayMs: -10 })).rejects.toThrow(
        /delayMs must be a number of milliseconds from 0 to/,
      );
      await expect(queues.add('mail', 'send', {}, { delayMs: 1, runAt: new Date() })).rejects.toThrow(
        /runAt or delayMs, not both/,
      );
      await expect(queues.add('mail', 'send', {}, { runAt: new Date('nope') })).rejects.toThrow(/runAt must be a valid Date/);
      await expect(queues.add('mail', '', {})).rejects.toThrow(/Invalid job name "": it is empty/);
      await expect(queues.add('no such queue!', 'send', {})).rejects.toThrow(/Invalid queue name/);
      expect(await storedJobs()).toBe(0);
    });

    it('rejects extreme times up front with a PgQueueConfigError, not a PostgreSQL range error', async () => {
      for (const opts of [
        { delayMs: 1e20 },
        { delayMs: Number.MAX_SAFE_INTEGER },
        { runAt: new Date('+010000-01-01T00:00:00Z') },
        { runAt: new Date(-1e15) },
      ]) {
        const err = await queues.add('mail', 'send', {}, opts).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(PgQueueConfigError);
        expect((err as Error).message).toMatch(
          /delayMs must be a number of milliseconds from 0 to 3153600000000 \(100 years\)|outside 1970-01-01 to 9999-12-31/,
        );
      }
      await expect(queues.add('mail', 'send', {}, { timeoutMs: 2 ** 31 })).rejects.toThrow(
        /timeoutMs: 2147483648 \(it is above 2147483647\)/,
      );
      await expect(queues.add('mail', 'send', {}, { backoff: { type: 'fixed', delayMs: 2 ** 40 } })).rejects.toThrow(
        /backoff\.delayMs: .*it is above/,
      );
      expect(await storedJobs()).toBe(0);
      // The longest delay and the latest runAt are stored and read back as given.
      const latest = new Date(Date.UTC(9999, 11, 31, 23, 59, 59, 999));
      const far = await queues.add('mail', 'send', {}, { runAt: latest });
      expect((await queues.getJob(far.id))?.runAt).toEqual(latest);
      const long = await queues.add('mail', 'send', {}, { delayMs: 3_153_600_000_000 });
      expect((await queues.getJob(long.id))?.runAt.getTime()).toBeGreaterThan(Date.now() + 3_153_500_000_000);
      for (const j of [far, long]) expect(await queues.getQueue('mail').remove(j.id)).toBe(true);
    });

    it('refuses unknown job options instead of ignoring them, naming ours for the bullmq ones', async () => {
      const cases: [object, RegExp][] = [
        [{ delay: 60_000 }, /Unknown option\(s\) in job options of "mail\/send": "delay" \(use delayMs \(milliseconds\)\)/],
        [{ jobId: 'order-1' }, /"jobId" \(use uniqueKey/],
        [
          { removeOnComplete: true, removeOnFail: 10 },
          /"removeOnComplete" \(use the module option retention\.completedMs.*"removeOnFail" \(use the module option retention\.failedMs/,
        ],
        [{ lifo: true }, /"lifo" \(use nothing: jobs run in priority, then runAt order/],
        [
          { repeat: { pattern: '* * * * *' } },
          /"repeat" \(use registerQueue\(\{ name, repeat: \[\{ name, cron \}\] \}\) or @Process\(\{ name, cron \}\)\)/,
        ],
        [{ backoff: 1000 }, /backoff: 1000\. A backoff is an object: \{ type: 'fixed', delayMs: 1000 \}/],
        [{ backoff: { type: 'exponential', delay: 1000 } }, /job options of "mail\/send"\.backoff: "delay" \(use delayMs/],
        [{ timeoutms: 10 }, /"timeoutms" \(use timeoutMs\)/],
      ];
      for (const [opts, message] of cases) {
        const err = await queues.add('mail', 'send', {}, opts as never).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(PgQueueConfigError);
        expect((err as Error).message).toMatch(message);
      }
      // In addBulk the transaction is the second argument: in an entry's opts it would be ignored.
      await expect(queues.addBulk('mail', [{ name: 'send', payload: {}, opts: { manager: {} } as never }])).rejects.toThrow(
        /"manager" \(use addBulk's second argument: addBulk\(jobs, \{ manager \}\)/,
      );
      await expect(queues.addBulk('mail', [{ name: 'send', payload: {}, opts: { delay: 5 } as never }])).rejects.toThrow(
        /"delay" \(use delayMs/,
      );
      await expect(queues.addBulk('mail', [{ name: 'send', data: { id: 1 } } as never])).rejects.toThrow(
        /entry 0 has unknown key "data" \(use payload, as in add\(name, payload\)\)/,
      );
      expect(await storedJobs()).toBe(0);
    });

    it('rejects a job name or unique key PostgreSQL would store changed, so nothing is stored and no keys collide', async () => {
      const half = '😀'.slice(0, 1);
      await expect(queues.add('mail', `send${half}`, {})).rejects.toThrow(
        /Invalid job name "send\\ud83d": it contains a lone UTF-16 surrogate/,
      );
      // Stored as text, both keys would become "k\ufffd": one job, and an error for the other.
      for (const key of [`k${half}`, `k${'😀'.slice(1)}`]) {
        const err = await queues.add('mail', 'send', {}, { uniqueKey: key }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(PgQueueConfigError);
        expect((err as Error).message).toMatch(
          /uniqueKey "k\\ud[89a-f]\w\w" cannot be used: it contains a lone UTF-16 surrogate/,
        );
      }
      await expect(queues.add('mail', 'send', {}, { uniqueKey: 'a\u0000b' })).rejects.toThrow(
        /uniqueKey "a\\u0000b" cannot be used: it contains a NUL character/,
      );
      const long = await queues.add('mail', 'send', {}, { uniqueKey: 'u'.repeat(10_000) }).catch((e: unknown) => e);
      expect((long as Error).message).toMatch(/it is 10000 characters long, over the limit of 1000/);
      expect((long as Error).message.length).toBeLessThan(400);
      expect(await storedJobs()).toBe(0);
    });

    it('in addBulk, one bad payload rejects the whole call before anything is stored', async () => {
      // Counted, not looked up by id: earlier tests here stored and removed jobs, so no id is sure to be absent.
      const before = await storedJobs();
      await expect(
        queues.addBulk('mail', [
          { name: 'send', payload: { ok: 1 } },
          { name: 'send', payload: { bad: 1n } },
        ]),
      ).rejects.toBeInstanceOf(PgQueuePayloadError);
      expect(await storedJobs()).toBe(before);
    });

    it('getJob with an id that is not a number answers null rather than a SQL error', async () => {
      expect(await queues.getJob('1; DROP TABLE x')).toBeNull();
    });
  });
});
