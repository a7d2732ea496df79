import 'reflect-metadata';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Client } from 'pg';
import {
  CancelJobError,
  InjectQueue,
  PgQueueModule,
  Process,
  Processor,
  QueueService,
  type ActiveJob,
  type Job,
  type Queue,
} from '../../lib';
import { PgQueueTester, PgQueueTestingModule } from '../../lib/testing';
import { runtimeOf } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

const HOUR = 3_600_000;
let checkoutRuns = 0;

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
const gate = { started: deferred(), release: deferred() };

@Processor('work')
class WorkProcessor {
  constructor(@InjectQueue('work') private readonly work: Queue) {}

  @Process('double')
  double(job: Job<{ n: number }>) {
    return { doubled: job.payload.n * 2 };
  }

  @Process('fails-once')
  failsOnce(job: Job) {
    if (job.attempt === 1) throw new Error('transient');
    return 'ok';
  }

  @Process('always-fails')
  alwaysFails() {
    throw new Error('broken for good');
  }

  @Process('cancel-me')
  cancelMe() {
    throw new CancelJobError('not wanted');
  }

  @Process('gated')
  async gated() {
    gate.started.resolve();
    await gate.release.promise;
  }

  @Process('checkout')
  async checkout(job: ActiveJob) {
    const n = await job.step('count', () => ++checkoutRuns);
    await job.sleep('a-day', 24 * HOUR);
    const ok = await job.waitFor<{ by: string }>('ok');
    return { n, by: ok.by };
  }

  @Process('fan-out')
  async fanOut(job: Job<{ count: number }>) {
    for (let n = 0; n < job.payload.count; n++) await this.work.add('double', { n });
  }
}

@Processor('mail')
class MailProcessor {
  @Process('send')
  send(job: Job<{ to: string }>) {
    return `sent to ${job.payload.to}`;
  }
}

@Module({
  imports: [
    PgQueueModule.registerQueue(
      {
        name: 'work',
        concurrency: 3,
        defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: HOUR, jitter: false } },
      },
      { name: 'mail' },
    ),
  ],
  providers: [WorkProcessor, MailProcessor],
})
class FeatureModule {}

describe('nestjs-pg-queue/testing: PgQueueTestingModule and PgQueueTester on the real engine', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let tester: PgQueueTester;
  let work: Queue;
  let mail: Queue;

  beforeAll(async () => {
    db = await createTestDatabase();
    @Module({ imports: [PgQueueModule.forRoot({ connection: db.url }), FeatureModule] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
    moduleRef.useLogger(process.env.PGQUEUE_TEST_LOGS ? console : false);
    app = await moduleRef.init();
    tester = app.get(PgQueueTester);
    const queues = app.get(QueueService);
    work = queues.getQueue('work');
    mail = queues.getQueue('mail');
  });

  beforeEach(() => tester.clear());

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('starts nothing in the background: no LISTEN connection, no claim until the test asks', async () => {
    const s = runtimeOf(app).supervisor;
    expect(s.isManual).toBe(true);
    expect(s.listenerState).toBeNull();
    const job = await work.add('double', { n: 1 });
    // Manual workers make no claim of their own: none was answered, before or after an enqueue.
    expect(s.claimsAnswered('work')).toBe(0);
    expect((await work.getJob(job.id))!.state).toBe('waiting');
    await tester.drain();
    expect(s.claimsAnswered('work')).toBeGreaterThan(0);
  });

  it('drain() runs every due job with the real handlers; outcomes are written when it resolves', async () => {
    const a = await work.add('double', { n: 2 });
    const b = await mail.add('send', { to: 'ann@example.com' });
    const outcomes = await tester.drain();
    expect(outcomes.map((o) => [o.event, o.job.id])).toEqual(
      expect.arrayContaining([
        ['completed', a.id],
        ['completed', b.id],
      ]),
    );
    expect(tester.completed.find((o) => o.job.id === a.id)!.result).toEqual({ doubled: 4 });
    // No wait: the outcome is in the database once drain() resolves.
    expect(await work.getJob(a.id)).toMatchObject({ state: 'completed', result: { doubled: 4 } });
    expect(await mail.getJob(b.id)).toMatchObject({ state: 'completed', result: 'sent to ann@example.com' });
    expect(await tester.drain()).toEqual([]);
  });

  it('drain() resolves only once the outcome write has committed', async () => {
    const job = await work.add('gated', {});
    let resolved = false;
    const drained = tester.drain({ queue: 'work' }).then(() => (resolved = true));
    await gate.started.promise;
    // Lock the claimed row, so the outcome write has to wait for this transaction.
    const locker = new Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE', [job.id]);
      gate.release.resolve();
      await waitFor(
        async () =>
          (await locker.query(`SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [db.name]))
            .rowCount! > 0,
        { message: 'the outcome write to wait on the row lock' },
      );
      expect(resolved).toBe(false);
      await locker.query('COMMIT');
    } finally {
      await locker.end();
    }
    await drained;
    expect((await work.getJob(job.id))!.state).toBe('completed');
  });

  it('runNext() runs one job and returns its outcome; null when none is due', async () => {
    const first = await work.add('double', { n: 5 });
    const second = await work.add('double', { n: 6 });
    const outcome = await tester.runNext('work');
    expect(outcome).toMatchObject({ event: 'completed', result: { doubled: 10 } });
    expect(outcome!.job.id).toBe(first.id);
    // Round trips on another queue: a worker that went on claiming by itself would have by now.
    await tester.drain({ queue: 'mail' });
    await tester.drain({ queue: 'mail' });
    expect((await work.getJob(second.id))!.state).toBe('waiting');
    expect(tester.ran.map((j) => j.id)).toEqual([first.id]);
    expect(await tester.runNext()).toMatchObject({ event: 'completed', job: { id: second.id } });
    expect(await tester.runNext()).toBeNull();
  });

  it('a retry waits for its backoff; drain({ makeDue: true }) runs it at once', async () => {
    const job = await work.add('fails-once', {});
    await tester.drain();
    expect(tester.retried).toHaveLength(1);
    expect(tester.retried[0]).toMatchObject({ job: { id: job.id }, error: { message: 'transient', attempt: 1 }, delayMs: HOUR });
    expect((await work.getJob(job.id))!.state).toBe('delayed');

    await tester.drain({ makeDue: true });
    expect(tester.completed.map((o) => [o.job.id, o.job.attempt, o.result])).toEqual([[job.id, 2, 'ok']]);
    expect(await work.getJob(job.id)).toMatchObject({ state: 'completed', attempt: 2 });
  });

  it('records failed and cancelled attempts with their errors', async () => {
    const broken = await work.add('always-fails', {}, { attempts: 2 });
    const unwanted = await work.add('cancel-me', {});
    await tester.drain({ makeDue: true });
    expect(tester.retried.map((o) => o.job.id)).toEqual([broken.id]);
    expect(tester.failed).toEqual([
      expect.objectContaining({
        job: expect.objectContaining({ id: broken.id }),
        error: expect.objectContaining({ message: 'broken for good', attempt: 2 }),
      }),
    ]);
    expect(tester.cancelled).toEqual([
      expect.objectContaining({
        job: expect.objectContaining({ id: unwanted.id }),
        error: expect.objectContaining({ message: 'not wanted' }),
      }),
    ]);
    expect(await work.getJob(broken.id)).toMatchObject({ state: 'failed', attempt: 2 });
    expect((await work.getJob(unwanted.id))!.state).toBe('cancelled');
    expect(tester.ran.map((j) => j.id)).toEqual(expect.arrayContaining([broken.id, broken.id, unwanted.id]));
    expect(tester.ran).toHaveLength(3);
  });

  it('durable steps: drain({ makeDue: true }) ends a job.sleep(), a job.waitFor() waits for queue.signal()', async () => {
    const job = await work.add('checkout', {});
    // Parked in its sleep: no outcome, the job delayed, the step recorded once.
    expect(await tester.drain({ queue: 'work' })).toEqual([]);
    expect((await work.getJob(job.id))!.state).toBe('delayed');
    expect(await tester.drain({ queue: 'work' })).toEqual([]);
    // The day passes: it resumes, and parks again on its wait, which makeDue leaves alone.
    expect(await tester.drain({ queue: 'work', makeDue: true })).toEqual([]);
    expect((await work.getJobSteps(job.id)).map((s) => [s.name, s.status])).toEqual([
      ['count', 'done'],
      ['a-day', 'done'],
      ['ok', 'waiting'],
    ]);
    expect(await work.signal(job.id, 'ok', { by: 'ann' })).toBe(true);
    const [done] = await tester.drain({ queue: 'work' });
    expect(done).toMatchObject({ event: 'completed', result: { n: 1, by: 'ann' } });
    expect(tester.ran.filter((j) => j.id === job.id)).toHaveLength(3);
  });

  it('makeDue() makes delayed jobs due now; drain() alone leaves them', async () => {
    const later = await mail.add('send', { to: 'bob@example.com' }, { delayMs: HOUR });
    expect(await tester.drain()).toEqual([]);
    expect((await tester.counts('mail')).delayed).toBe(1);
    expect(await tester.makeDue('work')).toBe(0); // another queue's job stays
    expect(await tester.makeDue()).toBe(1);
    expect((await tester.counts('mail')).waiting).toBe(1);
    await tester.drain({ queue: 'mail' });
    expect(await mail.getJob(later.id)).toMatchObject({ state: 'completed' });
  });

  it('jobs a handler enqueues run in the same drain()', async () => {
    await work.add('fan-out', { count: 7 });
    await tester.drain();
    expect(tester.completed.filter((o) => o.job.name === 'double').map((o) => o.result)).toHaveLength(7);
    expect(await tester.allCounts()).toMatchObject({ work: expect.objectContaining({ waiting: 0, active: 0 }) });
  });

  it('drain() stops with a clear error after maxJobs attempts', async () => {
    for (let i = 0; i < 4; i++) await work.add('double', { n: i });
    await expect(tester.drain({ maxJobs: 2 })).rejects.toThrow(/ran 3 attempts and jobs are still due \(maxJobs 2\)/);
    await tester.drain();
  });

  it('names the queues it can drive when asked for one without a processor', async () => {
    await expect(tester.runNext('nope')).rejects.toThrow(/no @Processor for queue "nope".*"work", "mail"/);
  });
});

describe('nestjs-pg-queue/testing: the first round of a fresh app', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  // A worker starts believing its queue may hold more: the first job that ends would send it
  // claiming by itself, had manual mode not switched that off too.
  it('runNext() runs one job; the worker claims no other by itself after it', async () => {
    @Module({ imports: [PgQueueModule.forRoot({ connection: db.url }), FeatureModule] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule, PgQueueTestingModule.forRoot()] }).compile();
    moduleRef.useLogger(false);
    app = await moduleRef.init();
    const tester = app.get(PgQueueTester);
    const work = app.get(QueueService).getQueue('work');
    const jobs = [];
    for (let n = 0; n < 5; n++) jobs.push(await work.add('double', { n }));
    await tester.runNext('work');
    // Round trips on another queue: a claim the worker had sent by itself would have landed.
    for (let i = 0; i < 3; i++) await tester.drain({ queue: 'mail' });
    expect(tester.ran.map((j) => j.id)).toEqual([jobs[0].id]);
    expect((await tester.counts('work')).waiting).toBe(4);
  });
});
