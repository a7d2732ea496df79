import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { InjectQueue, PgQueueConfigError, PgQueueModule, Queue, QueueService } from '../../lib';
import { createTestDatabase, type TestDatabase } from '../support/database';

// Issue 24, point 5: the same queue in two modules. A bare registerQueue({ name }) (a producer's)
// takes the options of the full one (the worker's), whichever module Nest creates first; two
// full ones that differ fail the boot naming the option and both values.

@Injectable()
class Producer {
  constructor(@InjectQueue('mail') readonly mail: Queue) {}
}

describe('one queue registered in two modules', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  for (const bareFirst of [true, false]) {
    it(`a bare registration takes the full one's options (bare module ${bareFirst ? 'first' : 'last'})`, async () => {
      @Module({ imports: [PgQueueModule.registerQueue({ name: 'mail' })], providers: [Producer] })
      class ProducerModule {}
      @Module({ imports: [PgQueueModule.registerQueue({ name: 'mail', concurrency: 3, defaultJobOptions: { attempts: 7 } })] })
      class WorkerModule {}
      @Module({
        imports: [
          PgQueueModule.forRoot({ connection: db.url, workers: false, listen: false }),
          ...(bareFirst ? [ProducerModule, WorkerModule] : [WorkerModule, ProducerModule]),
        ],
      })
      class AppModule {}
      const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
      try {
        const job = await app.get(Producer).mail.add('hello', {});
        expect(job.maxAttempts).toBe(7);
        expect(app.get(QueueService).getQueue('mail')).toBe(app.get(Producer).mail);
      } finally {
        await app.close();
      }
    });
  }

  it('two full registrations that differ fail the boot, naming the option and both values', async () => {
    @Module({ imports: [PgQueueModule.registerQueue({ name: 'mail', concurrency: 3 })] })
    class A {}
    @Module({ imports: [PgQueueModule.registerQueue({ name: 'mail', concurrency: 4 })] })
    class B {}
    @Module({ imports: [PgQueueModule.forRoot({ connection: db.url, workers: false, listen: false }), A, B] })
    class AppModule {}
    const err = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false }).then(
      async (app) => {
        await app.close();
        return new Error('the app booted');
      },
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toMatch(/Queue "mail" is registered twice with different options: concurrency is [34] .* and [34] /);
  });
});
