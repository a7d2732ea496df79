import 'reflect-metadata';
import { Inject, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { InjectQueue, PgQueueConfigError, PgQueueModule, Process, Processor, Queue, QueueService } from '../../lib';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

// Issue 28, point 4: registerQueueAsync, a queue whose options come from configuration. The
// factory's options are validated at boot exactly as registerQueue's, and a bare registration of
// the same queue elsewhere takes them whichever module Nest creates first.

/** A ConfigService as @nestjs/config's (not installed here): get(key) from a map. */
@Injectable()
class ConfigService {
  constructor(@Inject('ENV') private readonly env: Record<string, string>) {}
  get(key: string): string | undefined {
    return this.env[key];
  }
}

function configModule(env: Record<string, string>) {
  @Module({ providers: [{ provide: 'ENV', useValue: env }, ConfigService], exports: [ConfigService] })
  class ConfigModule {}
  return ConfigModule;
}

@Injectable()
class Producer {
  constructor(@InjectQueue('mail') readonly mail: Queue) {}
}

@Processor('mail')
class MailProcessor {
  @Process('hello')
  hello() {
    return 'sent';
  }
}

function mailAsync(ConfigModule: ReturnType<typeof configModule>) {
  return PgQueueModule.registerQueueAsync({
    name: 'mail',
    imports: [ConfigModule],
    inject: [ConfigService],
    useFactory: async (config: ConfigService) => {
      await Promise.resolve(); // an async factory, as one reading a secret store
      return {
        concurrency: Number(config.get('MAIL_CONCURRENCY')),
        defaultJobOptions: { attempts: Number(config.get('MAIL_ATTEMPTS')) },
      };
    },
  });
}

async function bootError(root: object): Promise<Error> {
  return NestFactory.createApplicationContext(root as never, { logger: false, abortOnError: false }).then(
    async (app) => {
      await app.close();
      return new Error('the app booted');
    },
    (e: Error) => e,
  );
}

describe('registerQueueAsync', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  for (const bareFirst of [true, false]) {
    it(`takes its options from a config provider; a bare registration gets them (bare module ${bareFirst ? 'first' : 'last'})`, async () => {
      const ConfigModule = configModule({ MAIL_CONCURRENCY: '3', MAIL_ATTEMPTS: '7' });
      @Module({ imports: [PgQueueModule.registerQueue({ name: 'mail' })], providers: [Producer] })
      class ProducerModule {}
      @Module({ imports: [mailAsync(ConfigModule)], providers: [MailProcessor] })
      class WorkerModule {}
      @Module({
        imports: [
          PgQueueModule.forRoot({ connection: db.url, listen: false, pollIntervalMs: 100 }),
          ...(bareFirst ? [ProducerModule, WorkerModule] : [WorkerModule, ProducerModule]),
        ],
      })
      class AppModule {}
      const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
      try {
        const job = await app.get(Producer).mail.add('hello', {});
        expect(job.maxAttempts).toBe(7);
        const qs = app.get(QueueService);
        expect(qs.getQueue('mail')).toBe(app.get(Producer).mail);
        expect(qs.getConcurrency('mail')).toBe(3);
        // The worker runs the queue with the factory's options.
        await waitFor(async () => (await qs.getQueue('mail').getJob(job.id))?.state === 'completed', {
          timeoutMs: 20_000,
          message: 'the job to complete',
        });
      } finally {
        await app.close();
      }
    });
  }

  it('refuses bad options at boot with the message registerQueue gives', async () => {
    const expected = (() => {
      try {
        PgQueueModule.registerQueue({ name: 'mail', concurrency: 0 });
      } catch (e) {
        return (e as Error).message;
      }
      throw new Error('registerQueue accepted concurrency 0');
    })();
    const ConfigModule = configModule({ MAIL_CONCURRENCY: '0', MAIL_ATTEMPTS: '1' });
    @Module({ imports: [PgQueueModule.forRoot({ connection: db.url, workers: false, listen: false }), mailAsync(ConfigModule)] })
    class AppModule {}
    const err = await bootError(AppModule);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toBe(expected);
  });

  it('refuses an unknown queue option the factory returns, naming it', async () => {
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: db.url, workers: false, listen: false }),
        PgQueueModule.registerQueueAsync({ name: 'mail', useFactory: () => ({ concurency: 3 }) as never }),
      ],
    })
    class AppModule {}
    const err = await bootError(AppModule);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toMatch(/concurency/);
  });

  it('a full registerQueue of the same queue that differs fails the boot, naming the option', async () => {
    const ConfigModule = configModule({ MAIL_CONCURRENCY: '4', MAIL_ATTEMPTS: '7' });
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: db.url, workers: false, listen: false }),
        PgQueueModule.registerQueue({ name: 'mail', concurrency: 3, defaultJobOptions: { attempts: 7 } }),
        mailAsync(ConfigModule),
      ],
    })
    class AppModule {}
    const err = await bootError(AppModule);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toMatch(/Queue "mail" is registered twice with different options: concurrency is [34] .* and [34] /);
  });

  it('refuses a factory that renames the queue, and bad async options when declared', async () => {
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: db.url, workers: false, listen: false }),
        PgQueueModule.registerQueueAsync({ name: 'mail', useFactory: () => ({ name: 'post' }) }),
      ],
    })
    class AppModule {}
    const err = await bootError(AppModule);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toMatch(/useFactory returned name "post"/);
    expect(() => PgQueueModule.registerQueueAsync({ name: 'mail', useClass: Producer } as never)).toThrow(
      /unknown option\(s\) "useClass"/,
    );
    expect(() => PgQueueModule.registerQueueAsync({ name: 'bad name', useFactory: () => ({}) })).toThrow(PgQueueConfigError);
  });
});
