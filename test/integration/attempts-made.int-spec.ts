import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type ActiveJob, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// job.attemptsMade (issue 24, point 8): BullMQ's count of attempts that have ended, beside our
// 1-based job.attempt. A handler on its first run sees attempt 1 and attemptsMade 0.

const seen: { attempt: number; attemptsMade: number }[] = [];
let release: (() => void) | null = null;
let held = false;

@Processor('made')
class MadeProcessor {
  @Process()
  async run(job: ActiveJob<{ hold?: boolean }>) {
    seen.push({ attempt: job.attempt, attemptsMade: job.attemptsMade });
    if (job.payload.hold && seen.length === 2) {
      held = true;
      await new Promise<void>((r) => (release = r));
    }
    if (seen.length === 1) throw new Error('first run fails');
    return 'ok';
  }
}

describe('job.attemptsMade', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { hold?: boolean } }>;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'made', defaultJobOptions: { attempts: 3, backoff: { type: 'fixed', delayMs: 10 } } }],
      providers: [MadeProcessor],
    });
    queue = app.get(QueueService).getQueue('made');
  });
  afterAll(async () => {
    release?.();
    await app?.close();
  });

  it('is attempt - 1 while the job runs, and the attempts made once it waits or has finished', async () => {
    const job = await queue.add('x', { hold: true });
    expect([job.attempt, job.attemptsMade]).toEqual([0, 0]);
    await waitFor(() => held, { message: 'the second attempt to start' });
    // Read while the second attempt runs: one attempt has ended.
    const running = await queue.getJob(job.id);
    expect([running?.state, running?.attempt, running?.attemptsMade]).toEqual(['active', 2, 1]);
    release!();
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', { message: 'the job to complete' });
    const done = await queue.getJob(job.id);
    expect([done?.attempt, done?.attemptsMade]).toEqual([2, 2]);
    // What the handler saw: BullMQ's attemptsMade is 0 on the first run, ours attempt is 1.
    expect(seen).toEqual([
      { attempt: 1, attemptsMade: 0 },
      { attempt: 2, attemptsMade: 1 },
    ]);
  });
});
