import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type Job, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// uniqueKey on Job (issue 27 point 1): visible on live jobs, to the handler, and kept when the
// job finishes, without holding the key any longer (a new add with it inserts a new job).

const seen = new Map<string, string | null>();

@Processor('hk')
class HkProcessor {
  @Process()
  run(job: Job<{ fail?: boolean }>) {
    seen.set(job.id, job.uniqueKey);
    if (job.payload.fail) throw new Error('boom');
  }
}

describe('uniqueKey kept in history', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue<{ x: { fail?: boolean } }>;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [{ name: 'hk', defaultJobOptions: { attempts: 1 } }],
      providers: [HkProcessor],
    });
    queue = app.get(QueueService).getQueue('hk');
  });
  afterAll(() => app?.close());

  it('a live job shows its key (add, getJob, the handler) and a job without one shows null', async () => {
    const a = await queue.add('x', {}, { uniqueKey: 'live-1', delayMs: 60_000 });
    const plain = await queue.add('x', {}, { delayMs: 60_000 });
    expect(a.uniqueKey).toBe('live-1');
    expect(plain.uniqueKey).toBeNull();
    expect((await queue.getJob(a.id))?.uniqueKey).toBe('live-1');
    expect((await queue.getJob(plain.id))?.uniqueKey).toBeNull();
    expect((await queue.getJobByKey('live-1'))?.uniqueKey).toBe('live-1');
    const bulk = await queue.addBulk([
      { name: 'x', payload: {}, opts: { uniqueKey: 'bulk-1', delayMs: 60_000 } },
      { name: 'x', payload: {}, opts: { delayMs: 60_000 } },
    ]);
    expect(bulk.map((j) => j.uniqueKey)).toEqual(['bulk-1', null]);
    await queue.remove(a.id);
    await queue.remove(plain.id);
    for (const j of bulk) await queue.remove(j.id);
  });

  it('completed and failed jobs keep their key (getJob, getJobs); the handler saw it; the key is free again', async () => {
    const done = await queue.add('x', {}, { uniqueKey: 'k-done' });
    const failed = await queue.add('x', { fail: true }, { uniqueKey: 'k-failed' });
    await waitFor(async () => (await queue.getJob(done.id))?.state === 'completed', {
      message: 'the job to complete',
      timeoutMs: 20_000,
    });
    await waitFor(async () => (await queue.getJob(failed.id))?.state === 'failed', {
      message: 'the job to fail',
      timeoutMs: 20_000,
    });
    expect(seen.get(done.id)).toBe('k-done');
    expect((await queue.getJob(done.id))?.uniqueKey).toBe('k-done');
    expect((await queue.getJob(failed.id))?.uniqueKey).toBe('k-failed');
    const completedPage = await queue.getJobs({ state: 'completed', limit: 100 });
    expect(completedPage.jobs.find((j) => j.id === done.id)?.uniqueKey).toBe('k-done');
    const failedPage = await queue.getJobs({ state: 'failed', limit: 100 });
    expect(failedPage.jobs.find((j) => j.id === failed.id)?.uniqueKey).toBe('k-failed');
    // getJobByKey finds the job that holds the key now: none.
    expect(await queue.getJobByKey('k-done')).toBeNull();
    // History keeps the key but does not hold it: a new add inserts a new job.
    const again = await queue.add('x', {}, { uniqueKey: 'k-done', delayMs: 60_000 });
    expect(again.id).not.toBe(done.id);
    expect((await queue.getJobByKey('k-done'))?.id).toBe(again.id);
    await queue.remove(again.id);
  });

  it('a waiting job cancelled keeps its key in history', async () => {
    const a = await queue.add('x', {}, { uniqueKey: 'k-cancel', delayMs: 60_000 });
    expect(await queue.cancel(a.id)).toBeTruthy();
    const h = await queue.getJob(a.id);
    expect([h?.state, h?.uniqueKey]).toEqual(['cancelled', 'k-cancel']);
    const row = await t.pool.query(`SELECT unique_key FROM pgqueue.job_history WHERE id = $1`, [a.id]);
    expect(row.rows).toEqual([{ unique_key: 'k-cancel' }]);
  });
});
