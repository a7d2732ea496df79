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
    return { n: job.payload.n, at: Date.now() };
  }
}

/**
 * The README's promise: with jest's modern fake timers installed the way it says
 * (`doNotFake: ['nextTick', 'setImmediate']`), drain() still runs jobs to the end, and handlers
 * see the faked clock.
 */
describe('nestjs-pg-queue/testing under jest fake timers', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let tester: PgQueueTester;
  let queues: QueueService;

  beforeAll(async () => {
    db = await createTestDatabase();
    @Module({
      imports: [PgQueueModule.forRoot({ connection: db.url }), PgQueueModule.registerQueue({ name: 'timed' })],
      providers: [TimedProcessor],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
    moduleRef.useLogger(false);
    app = await moduleRef.init();
    tester = app.get(PgQueueTester);
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    jest.useRealTimers();
    await app?.close();
    await db?.drop();
  });

  it('drain() runs jobs while setTimeout, setInterval and Date are faked', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate'], now: new Date('2030-01-01T00:00:00Z') });
    const job = await queues.add('timed', 'stamp', { n: 7 });
    await tester.drain();
    expect(tester.completed).toEqual([expect.objectContaining({ result: { n: 7, at: Date.parse('2030-01-01T00:00:00Z') } })]);
    expect((await queues.getJob(job.id))!.state).toBe('completed');
    jest.useRealTimers();
  });
});
