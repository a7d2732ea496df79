import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { getQueueToken, PgQueueConfigError, Process, Processor, QueueService, type Job, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// A job's group wherever a job is made or read (issue 29, follow-up): the handler of a queue
// that is not grouped sees it (the plain claim and the limited claim return it), a job
// scheduler's ticks carry its template's group, and registerQueue's defaultJobOptions.group
// derives it from the payload. The grouped claim itself: groups.int-spec.ts.

const seen = new Map<string, string | null>();
const record = (job: Job) => {
  seen.set(job.id, job.group);
  return undefined;
};

@Processor('plain')
class PlainProcessor {
  @Process()
  run(job: Job) {
    return record(job);
  }
}

@Processor('limited')
class LimitedProcessor {
  @Process()
  run(job: Job) {
    return record(job);
  }
}

@Processor('sched')
class SchedProcessor {
  @Process()
  run(job: Job) {
    return record(job);
  }
}

@Processor('derived')
class DerivedProcessor {
  @Process()
  run(job: Job) {
    return record(job);
  }
}

interface Tenanted {
  tenant?: unknown;
  explode?: boolean;
}

describe('job groups beyond the grouped claim', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  const q = (name: string) => app.get<Queue>(getQueueToken(name));

  beforeAll(async () => {
    app = await bootApp({
      options: { connection: t.db.url, pollIntervalMs: 100 },
      queues: [
        { name: 'plain' },
        { name: 'limited', globalConcurrency: 2 },
        { name: 'sched', group: {} },
        {
          name: 'derived',
          group: { concurrency: 2 },
          defaultJobOptions: {
            // A function of the queue's payload type: accepted as written (a method-shaped option).
            group: (p: Tenanted) => {
              if (p.explode) throw new Error('no tenant in this payload');
              return p.tenant === undefined ? undefined : (p.tenant as string);
            },
          },
        },
      ],
      providers: [PlainProcessor, LimitedProcessor, SchedProcessor, DerivedProcessor],
    });
    await app.init();
  });
  afterAll(() => app?.close());

  const handled = (ids: string[]) =>
    waitFor(() => ids.every((id) => seen.has(id)), { timeoutMs: 20_000, message: `jobs ${ids.join(', ')} to be handled` });
  const live = async (queue: string) =>
    (await t.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = $1`, [queue])).rows[0].n;

  it('a handler of a queue without groups sees the group a job was added with', async () => {
    for (const name of ['plain', 'limited']) {
      const one = await q(name).add('x', {}, { group: 'g1' });
      const [two, three] = await q(name).addBulk([
        { name: 'x', payload: {}, opts: { group: 'g2' } },
        { name: 'x', payload: {} },
      ]);
      await handled([one.id, two.id, three.id]);
      expect([one, two, three].map((j) => seen.get(j.id))).toEqual(['g1', 'g2', null]);
    }
  });

  it("a job scheduler's ticks carry its template's group, as does runJobSchedulerNow", async () => {
    const sched = q('sched');
    await expect(sched.upsertJobScheduler('bad', { every: 1000 }, { name: 'tick', opts: { group: '' } })).rejects.toThrow(
      /group "" cannot be used: it is empty/,
    );
    const stored = await sched.upsertJobScheduler(
      's1',
      { every: 1000 },
      { name: 'tick', payload: {}, opts: { group: 'tenant-s' } },
    );
    expect(stored.template.opts).toEqual({ group: 'tenant-s' });
    expect((await sched.getJobScheduler('s1'))!.template.opts.group).toBe('tenant-s');
    // Real ticks: the first at once, the next a second later.
    const ticked = async () =>
      (
        await t.pool.query<{ id: string; group_key: string | null }>(
          `SELECT id::text, group_key FROM pgqueue.job_history WHERE queue = 'sched' AND state = 'completed' ORDER BY id`,
        )
      ).rows;
    await waitFor(async () => (await ticked()).length >= 2, { timeoutMs: 20_000, message: 'two ticks to run' });
    const rows = await ticked();
    expect(rows.map((r) => r.group_key)).toEqual(rows.map(() => 'tenant-s'));
    expect(rows.map((r) => seen.get(r.id))).toEqual(rows.map(() => 'tenant-s'));
    const now = await sched.runJobSchedulerNow('s1');
    await handled([now!]);
    expect(seen.get(now!)).toBe('tenant-s');
    await sched.removeJobScheduler('s1');
  });

  it("defaultJobOptions.group derives a job's group from its payload; a job's own group wins", async () => {
    const derived = q('derived');
    const a = await derived.add('x', { tenant: 'tenant-a' });
    expect(a.group).toBe('tenant-a');
    const own = await derived.add('x', { tenant: 'tenant-a' }, { group: 'mine' });
    expect(own.group).toBe('mine');
    const none = await derived.add('x', {});
    expect(none.group).toBeNull();
    const bulk = await derived.addBulk([
      { name: 'x', payload: { tenant: 'tenant-b' } },
      { name: 'x', payload: { tenant: 'tenant-b' }, opts: { group: 'other' } },
    ]);
    expect(bulk.map((j) => j.group)).toEqual(['tenant-b', 'other']);
    const flow = await app.get(QueueService).addFlow({
      queue: 'derived',
      name: 'parent',
      payload: { tenant: 'tenant-p' },
      children: [{ queue: 'derived', name: 'child', payload: { tenant: 'tenant-c' } }],
    });
    expect([flow.job.group, flow.children[0].job.group]).toEqual(['tenant-p', 'tenant-c']);
    // A scheduler's template without a group: derived once, at the upsert, from its payload.
    const s = await derived.upsertJobScheduler(
      'd1',
      { every: 60_000, startDate: new Date(Date.now() + 3_600_000) },
      {
        name: 'x',
        payload: { tenant: 'tenant-s' },
      },
    );
    expect(s.template.opts).toEqual({});
    const tick = await derived.runJobSchedulerNow('d1');
    const ids = [a.id, own.id, none.id, ...bulk.map((j) => j.id), flow.children[0].job.id, flow.job.id, tick!];
    await handled(ids);
    expect(ids.map((id) => seen.get(id))).toEqual([
      'tenant-a',
      'mine',
      null,
      'tenant-b',
      'other',
      'tenant-c',
      'tenant-p',
      'tenant-s',
    ]);
    expect((await derived.getJob(a.id))!.group).toBe('tenant-a');
    await derived.removeJobScheduler('d1');
  });

  it('a default group function that throws or returns a bad key fails the enqueue, naming the queue, and adds nothing', async () => {
    const derived = q('derived');
    const before = await live('derived');
    const thrown = await derived.add('x', { explode: true }).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(PgQueueConfigError);
    expect((thrown as Error).message).toMatch(
      /Job "x" of queue "derived": defaultJobOptions.group\(payload\) threw: no tenant in this payload\. Nothing was enqueued/,
    );
    expect((thrown as Error).cause).toBeInstanceOf(Error);
    await expect(derived.add('x', { tenant: 42 })).rejects.toThrow(
      /queue "derived": defaultJobOptions.group\(payload\): group 42 cannot be used: it is not a string/,
    );
    await expect(derived.add('x', { tenant: '' })).rejects.toThrow(PgQueueConfigError);
    await expect(
      derived.addBulk([
        { name: 'x', payload: { tenant: 'fine' } },
        { name: 'x', payload: { explode: true } },
      ]),
    ).rejects.toThrow(/queue "derived"/);
    await expect(
      app.get(QueueService).addFlow({
        queue: 'derived',
        name: 'parent',
        payload: { tenant: 'fine' },
        children: [{ queue: 'derived', name: 'child', payload: { tenant: 7 } }],
      }),
    ).rejects.toThrow(/queue "derived"/);
    expect(await live('derived')).toBe(before);
  });

  it('registerQueue refuses a default group that is not a function, and the module refuses one at all', async () => {
    await expect(
      bootApp({
        options: { connection: t.db.url, workers: false },
        queues: [{ name: 'z', defaultJobOptions: { group: 'tenant-1' as never } }],
      }),
    ).rejects.toThrow(/queue "z" defaultJobOptions.group: "tenant-1". A default group is a function of the payload/);
    await expect(
      bootApp({
        options: { connection: t.db.url, workers: false, defaultJobOptions: { group: () => 'x' } as never },
        queues: [{ name: 'z' }],
      }),
    ).rejects.toThrow(/registerQueue\(\{ defaultJobOptions: \{ group \} \}\)/);
  });
});
