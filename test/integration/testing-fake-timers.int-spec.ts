import 'reflect-metadata';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { PgQueueModule, Process, Processor, QueueService, type Job } from '../../lib';
import { PgQueueTester, PgQueueTestingModule } from '../../lib/testing';
import { createTestDatabase, type TestDatabase } from '../support/database';

@Processor('timed')
class TimedProcessor {
  @Process('stamp')
  stamp(job: Job<{ n: number }>) {
    if (job.attempt === 1 && job.payload.n < 0) throw new Error('negative, once');
    return { n: job.payload.n, at: Date.now() };
  }
}

const NOW = Date.parse('2030-01-01T00:00:00Z');

/**
 * The README's promise: with jest's modern fake timers and a real `process.nextTick` (which `pg`
 * needs), drain() runs jobs to the end, retries included, the handlers see the faked clock, and
 * app.close() returns, all with the timers still faked. (With every timer faked, drain() never
 * returns: tried, the test timed out.)
 */
describe.each([
  ['nextTick and setImmediate real', { doNotFake: ['nextTick', 'setImmediate'] as const }],
  ['only nextTick real', { doNotFake: ['nextTick'] as const }],
])('nestjs-pg-queue/testing under jest fake timers (%s)', (_label, config) => {
  let db: TestDatabase;
  let app: INestApplicationContext | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    jest.useRealTimers();
    await app?.close();
    await db?.drop();
  });

  it('drain() runs jobs and retries, handlers see the fake clock, and app.close() returns', async () => {
    @Module({
      imports: [PgQueueModule.forRoot({ connection: db.url }), PgQueueModule.registerQueue({ name: 'timed' })],
      providers: [TimedProcessor],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
    moduleRef.useLogger(false);
    app = await moduleRef.init();
    const tester = app.get(PgQueueTester);
    const queues = app.get(QueueService);

    jest.useFakeTimers({ doNotFake: [...config.doNotFake], now: NOW });
    const job = await queues.add('timed', 'stamp', { n: 7 });
    const retried = await queues.add('timed', 'stamp', { n: -1 });
    await tester.drain({ makeDue: true });
    expect(tester.completed.map((o) => o.result)).toEqual(
      expect.arrayContaining([
        { n: 7, at: NOW },
        { n: -1, at: NOW },
      ]),
    );
    expect(tester.retried.map((o) => o.job.id)).toEqual([retried.id]);
    expect((await queues.getJob(job.id))!.state).toBe('completed');
    await app.close();
    app = undefined;
    jest.useRealTimers();
  });
});
