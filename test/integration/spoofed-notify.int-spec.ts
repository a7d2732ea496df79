import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type ActiveJob, type PgQueueModuleOptions } from '../../lib';
import { migrate } from '../../lib/db/migrator';
import { bootApp, disableStaleBufferHandBack, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// Any role that can connect may NOTIFY the queue's channel (issue 25, point 1). A notification is
// a hint: '!cancel|id' and '!pause|queue' act only once the database confirms them, and a flood of
// wake-ups costs a bounded number of claims. The real cancel and pause: cancel-pause, pause and
// cancel-race.int-spec.ts.

const ran = new Set<string>();
const aborted = new Set<string>();
const release = new Map<string, () => void>();

@Processor('sp')
class SpoofedProcessor {
  @Process('fast')
  fast(job: ActiveJob<{ tag: string }>) {
    ran.add(job.payload.tag);
  }

  @Process('long')
  long(job: ActiveJob<{ tag: string }>) {
    return new Promise<void>((resolve, reject) => {
      job.signal.addEventListener('abort', () => {
        aborted.add(job.payload.tag);
        reject(new Error('aborted'));
      });
      release.set(job.payload.tag, () => {
        ran.add(job.payload.tag);
        resolve();
      });
    });
  }
}

@Processor('probe')
class ProbeProcessor {
  @Process()
  probe(job: ActiveJob<{ tag: string }>) {
    ran.add(job.payload.tag);
  }
}

@Processor('idle')
class IdleProcessor {
  @Process()
  idle() {
    return undefined;
  }
}

describe('spoofed notifications', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let probes = 0;

  // Polls are 60 s apart: every claim here comes from a notification or the boot.
  const options = (): PgQueueModuleOptions => ({ connection: t.db.url, pollIntervalMs: 60_000 });
  const notify = (payload: string) => t.pool.query(`SELECT pg_notify('pgqueue_jobs', $1)`, [payload]);
  /**
   * The listener gets notifications in commit order: once a probe job enqueued after the spoofed
   * one has run, the node has received the spoofed one too (and, before the fix, acted on it).
   */
  async function probe(): Promise<void> {
    const tag = `probe${++probes}`;
    await app.get(QueueService).add('probe', 'p', { tag });
    await waitFor(() => ran.has(tag), { message: `${tag} to run` });
  }
  const jobOf = async (tag: string) =>
    (
      await t.pool.query<{ state: string }>(
        `SELECT state FROM pgqueue.jobs WHERE payload->>'tag' = $1
         UNION ALL SELECT state FROM pgqueue.job_history WHERE payload->>'tag' = $1`,
        [tag],
      )
    ).rows;

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    // Every hand-back (an active job back to waiting) is logged: a spoofed pause must cause none.
    await t.pool.query(`
      CREATE TABLE handbacks (id bigint NOT NULL);
      CREATE FUNCTION log_handback() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO public.handbacks VALUES (NEW.id); RETURN NULL; END $$;
      CREATE TRIGGER log_handbacks AFTER UPDATE ON pgqueue.jobs FOR EACH ROW
        WHEN (OLD.state = 'active' AND NEW.state = 'waiting') EXECUTE FUNCTION log_handback();`);
    app = await bootApp({
      options: options(),
      queues: [
        { name: 'sp', concurrency: 1 },
        { name: 'probe', concurrency: 1 },
        { name: 'idle', concurrency: 1 },
      ],
      providers: [SpoofedProcessor, ProbeProcessor, IdleProcessor],
    });
    await waitFor(() => runtimeOf(app).supervisor.listenerState?.connected === true, { message: 'the listener' });
  });
  afterAll(async () => {
    for (const r of release.values()) r();
    await app?.close();
  });

  it("a spoofed '!cancel|id' does not abort a running job: it runs on and completes", async () => {
    const job = await app.get(QueueService).add('sp', 'long', { tag: 'victim' });
    await waitFor(() => release.has('victim'), { message: 'the victim job to start' });

    await notify(`!cancel|${job.id}`);
    await probe();
    expect(aborted.has('victim')).toBe(false);
    release.get('victim')!();
    await waitFor(async () => (await jobOf('victim'))[0]?.state === 'completed', {
      message: async () => `the victim to complete: ${JSON.stringify(await jobOf('victim'))}`,
    });
    expect(aborted.has('victim')).toBe(false);
  });

  it("a spoofed '!pause|queue' hands nothing back", async () => {
    disableStaleBufferHandBack(app, 'sp');
    const queues = app.get(QueueService);
    // Fast jobs first: the node learns its handlers are fast and starts prefetching.
    const warm = Array.from({ length: 30 }, (_, i) => `warm${i}`);
    await queues.addBulk(
      'sp',
      warm.map((tag) => ({ name: 'fast', payload: { tag } })),
    );
    await waitFor(() => warm.every((tag) => ran.has(tag)), { message: 'warm-up jobs' });
    // A long job ahead of four fast ones: with one slot, the node runs the long one and buffers the rest.
    const buffered = ['after1', 'after2', 'after3', 'after4'];
    await queues.addBulk('sp', [
      { name: 'long', payload: { tag: 'blocker' } },
      ...buffered.map((tag) => ({ name: 'fast', payload: { tag } })),
    ]);
    const active = async () =>
      (await Promise.all(['blocker', ...buffered].map(jobOf))).flat().filter((r) => r.state === 'active');
    await waitFor(async () => (await active()).length === 5, {
      message: 'the node to hold the long job and four prefetched ones',
    });

    await notify('!pause|sp');
    await probe();
    release.get('blocker')!();
    await waitFor(() => buffered.every((tag) => ran.has(tag)), { message: 'the prefetched jobs to run' });
    expect((await t.pool.query('SELECT id FROM handbacks')).rows).toEqual([]);
    expect(aborted.size).toBe(0);
  });

  it('10,000 spoofed wake-ups for an empty queue cost a handful of claims', async () => {
    const supervisor = runtimeOf(app).supervisor;
    await probe();
    const before = supervisor.claimsAnswered('idle');
    // One transaction: distinct payloads (identical ones are folded into one), each a wake-up
    // "due now" (a negative delay also restarts the claim window). Then cancels of ids nobody holds.
    await t.pool.query(`SELECT pg_notify('pgqueue_jobs', 'idle|-' || g) FROM generate_series(1, 10000) g`);
    await t.pool.query(`SELECT pg_notify('pgqueue_jobs', '!cancel|' || g) FROM generate_series(1, 10000) g`);
    await probe();
    // The claims the flood started have landed once the worker is waiting again.
    await waitFor(() => supervisor.claimsAnswered('idle') > before, { message: 'the flood to wake the idle queue' });
    const claims = supervisor.claimsAnswered('idle') - before;
    // At most one claim in flight per queue, and one more after it when wake-ups came meanwhile:
    // a burst read in a few socket reads costs a few claims, not one per notification.
    expect(claims).toBeLessThanOrEqual(10);
  });
});
