import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { once } from 'node:events';
import { BatchError, getQueueToken, Process, Processor, type ActiveJob, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// queue.cancel(id) of a job whose batch call has started (docs/processing.md#batch-handlers):
// settled as a single handler's job is. A result the call returns for it completes it (a
// completion wins); a call that honours the cancel names it in its BatchError with
// job.signal.reason, and it ends cancelled, not retried.

let started: string[] = [];

@Processor('bc')
class CancelProcessor {
  @Process({ name: 'send', batch: { size: 2, waitMs: 2000 } })
  async send(jobs: ActiveJob<{ honour: boolean }>[]) {
    started = jobs.map((j) => j.id);
    // The call runs until the first job's cancel reaches it (its signal fires).
    await once(jobs[0].signal, 'abort');
    if (!jobs[0].payload.honour) return jobs.map((j) => ({ sent: j.id }));
    const errors = new Map(jobs.filter((j) => j.signal.aborted).map((j) => [j.id, j.signal.reason as unknown]));
    throw new BatchError(errors, { results: jobs.map((j) => ({ sent: j.id })) });
  }
}

describe('a cancel reaching a running batch call', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'bc', concurrency: 4 }],
      providers: [CancelProcessor],
    });
    await app.init();
    queue = app.get<Queue>(getQueueToken('bc'));
  });
  afterAll(() => app?.close());

  const outcome = async (id: string) =>
    (
      await t.pool.query<{ state: string; attempt: number; result: unknown; errors: { name: string }[] }>(
        `SELECT state, attempt, result, errors FROM pgqueue.job_history WHERE id = $1`,
        [id],
      )
    ).rows[0];

  async function runWithCancel(honour: boolean) {
    started = [];
    const [a, b] = await queue.addBulk([
      { name: 'send', payload: { honour } },
      { name: 'send', payload: { honour } },
    ]);
    await waitFor(() => started.length === 2 && started.includes(a.id) && started.includes(b.id), {
      timeoutMs: 20_000,
      message: 'the batch call to start with both jobs',
    });
    const first = started[0];
    const other = started[1];
    expect(await queue.cancel(first)).toBe('cancelling');
    await waitFor(async () => (await outcome(first)) !== undefined && (await outcome(other)) !== undefined, {
      timeoutMs: 20_000,
      message: 'both jobs to finish',
    });
    return { first: await outcome(first), other: await outcome(other), otherId: other, firstId: first };
  }

  it('a call that returns a result for the cancelled job completes it, as a single handler that completes anyway', async () => {
    const r = await runWithCancel(false);
    expect(r.first).toMatchObject({ state: 'completed', attempt: 1, result: { sent: r.firstId } });
    expect(r.other).toMatchObject({ state: 'completed', result: { sent: r.otherId } });
  });

  it('a call that names it in BatchError with job.signal.reason ends it cancelled, not retried; the other completes', async () => {
    const r = await runWithCancel(true);
    expect(r.first).toMatchObject({ state: 'cancelled', attempt: 1 });
    expect(r.first.errors.at(-1)!.name).toBe('CancelJobError');
    expect(r.other).toMatchObject({ state: 'completed', result: { sent: r.otherId } });
  });
});
