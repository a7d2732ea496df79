import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { getQueueToken, PgQueueConfigError, Process, Processor, QueueService, type Job, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// A job's group (docs/groups.md): validated at enqueue, stored on the row, shown on Job, kept
// into history and back on retry; and a grouped queue's jobs without a group still run. The
// limits across processes: groups-multi-process.int-spec.ts.

const seen = new Map<string, string | null>();
let failFirst = true;

@Processor('g')
class GroupedProcessor {
  @Process()
  run(job: Job) {
    seen.set(job.id, job.group);
    if ((job.payload as { fail?: boolean }).fail && failFirst) throw new Error('fails for good');
    return undefined;
  }
}

// A queue with fair turns only (group: {}): its claim of a single group takes a one-statement
// path (claim_grouped in migration 17) that must still honour a stored override of that group.
let running = 0;
let maxRunning = 0;
let fairDone = 0;

@Processor('fair')
class FairProcessor {
  @Process()
  async run() {
    running++;
    maxRunning = Math.max(maxRunning, running);
    // Held a moment so that jobs claimed together overlap (the check is on the maximum, not on time).
    await new Promise((r) => setTimeout(r, 100));
    running--;
    fairDone++;
    return undefined;
  }
}

describe('job groups', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [
        { name: 'g', concurrency: 5, group: { concurrency: 2 }, defaultJobOptions: { attempts: 1 } },
        { name: 'plain' },
        { name: 'fair', concurrency: 10, group: {} },
      ],
      providers: [GroupedProcessor, FairProcessor],
    });
    await app.init();
    queue = app.get<Queue>(getQueueToken('g'));
  });
  afterAll(() => app?.close());

  const history = async (id: string) =>
    (await t.pool.query(`SELECT state, group_key FROM pgqueue.job_history WHERE id = $1`, [id])).rows[0] as
      { state: string; group_key: string | null } | undefined;

  it('add, addBulk and flows store the group; the handler, getJob and history show it', async () => {
    const one = await queue.add('x', {}, { group: 'tenant-1' });
    expect(one.group).toBe('tenant-1');
    const bulk = await queue.addBulk([
      { name: 'x', payload: {}, opts: { group: 'tenant-2' } },
      { name: 'x', payload: {} },
    ]);
    expect(bulk.map((j) => j.group)).toEqual(['tenant-2', null]);
    const flow = await app.get(QueueService).addFlow({
      queue: 'g',
      name: 'parent',
      payload: {},
      opts: { group: 'tenant-3' },
      children: [{ queue: 'g', name: 'child', payload: {}, opts: { group: 'tenant-4' } }],
    });
    const ids = [one.id, ...bulk.map((j) => j.id), flow.job.id, flow.children[0].job.id];
    await waitFor(async () => (await Promise.all(ids.map(history))).every((h) => h?.state === 'completed'), {
      timeoutMs: 20_000,
      message: 'every job to complete (the one without a group too: it has its own turn)',
    });
    expect(ids.map((id) => seen.get(id))).toEqual(['tenant-1', 'tenant-2', null, 'tenant-3', 'tenant-4']);
    expect((await Promise.all(ids.map(history))).map((h) => h!.group_key)).toEqual([
      'tenant-1',
      'tenant-2',
      null,
      'tenant-3',
      'tenant-4',
    ]);
    expect((await queue.getJob(one.id))!.group).toBe('tenant-1');
  });

  it('a failed job keeps its group in history, and a retry from history brings it back with it', async () => {
    failFirst = true;
    const job = await queue.add('x', { fail: true }, { group: 'tenant-9' });
    await waitFor(async () => (await history(job.id))?.state === 'failed', { timeoutMs: 20_000, message: 'the job to fail' });
    expect((await history(job.id))!.group_key).toBe('tenant-9');
    failFirst = false;
    expect(await queue.retry(job.id)).toBe(true);
    await waitFor(async () => (await history(job.id))?.state === 'completed', { timeoutMs: 20_000, message: 'the retry to run' });
    expect((await queue.getJob(job.id))!.group).toBe('tenant-9');
  });

  it('a group is validated at enqueue', async () => {
    await expect(queue.add('x', {}, { group: '' })).rejects.toThrow(/group "" cannot be used: it is empty/);
    await expect(queue.add('x', {}, { group: 'x'.repeat(201) })).rejects.toThrow(/1 to 200 characters/);
    await expect(queue.add('x', {}, { group: 42 as unknown as string })).rejects.toThrow(PgQueueConfigError);
  });

  it('setGroupConcurrency validates and round-trips', async () => {
    await expect(queue.setGroupConcurrency('t', 0)).rejects.toThrow(/not a concurrency/);
    await queue.setGroupConcurrency('t', 7);
    expect(await queue.getGroupConcurrency('t')).toBe(7);
    await queue.removeGroupConcurrency('t');
    expect(await queue.getGroupConcurrency('t')).toBeNull();
  });

  it('group: {} with one group: a stored setGroupConcurrency still caps it', async () => {
    const fair = app.get<Queue>(getQueueToken('fair'));
    await fair.setGroupConcurrency('solo', 2);
    await fair.addBulk(Array.from({ length: 8 }, () => ({ name: 'x', payload: {}, opts: { group: 'solo' } })));
    await waitFor(() => fairDone >= 8, { timeoutMs: 20_000 });
    expect(maxRunning).toBeGreaterThan(0);
    expect(maxRunning).toBeLessThanOrEqual(2);
  });

  it('registerQueue refuses group with globalConcurrency, and an unknown order', async () => {
    await expect(
      bootApp({ options: { connection: t.db.url }, queues: [{ name: 'z', group: {}, globalConcurrency: 2 }] }),
    ).rejects.toThrow(/grouped queue takes per-group limits only/);
    await expect(
      bootApp({ options: { connection: t.db.url }, queues: [{ name: 'z', group: { order: 'lifo' as 'fifo' } }] }),
    ).rejects.toThrow(/group.order/);
  });
});
