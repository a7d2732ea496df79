import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type ActiveJob, type PgQueueModuleOptions } from '../../lib';
import { migrate } from '../../lib/db/migrator';
import { bootApp, disableStaleBufferHandBack, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// queue.pause(): what a node had prefetched goes back to the queue and does not run, and the
// pause, stored in the database, holds for a node that restarts and for one that boots later.

const ran = new Set<string>();
let releaseLong: () => void = () => undefined;

@Processor('pf')
class PrefetchProcessor {
  @Process('fast')
  fast(job: ActiveJob<{ tag: string }>) {
    ran.add(job.payload.tag);
  }

  @Process('long')
  long(job: ActiveJob<{ tag: string }>) {
    return new Promise<void>((resolve) => {
      releaseLong = () => {
        ran.add(job.payload.tag);
        resolve();
      };
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

@Processor('held')
class HeldProcessor {
  @Process()
  held(job: ActiveJob<{ tag: string }>) {
    ran.add(job.payload.tag);
  }
}

describe('pause', () => {
  const t = useTestDatabase();
  const apps: INestApplicationContext[] = [];

  // Polls are 60 s apart: every claim in these tests comes from a notification or a boot.
  const options = (applicationName: string): PgQueueModuleOptions => ({
    connection: { connectionString: t.db.url, application_name: applicationName },
    pollIntervalMs: 60_000,
  });
  async function boot(
    applicationName: string,
    queues: string[],
    providers: NonNullable<Parameters<typeof bootApp>[0]['providers']>,
  ) {
    const app = await bootApp({
      options: options(applicationName),
      queues: queues.map((name) => ({ name, concurrency: 1 })),
      providers,
    });
    apps.push(app);
    await waitFor(() => runtimeOf(app).supervisor.listenerState?.connected === true, {
      message: `${applicationName}'s listener to connect`,
    });
    return app;
  }
  const stateOf = async (tags: string[]) =>
    (
      await t.pool.query<{ tag: string; state: string; locked_by: string | null; attempt: number }>(
        `SELECT payload->>'tag' AS tag, state, locked_by, attempt FROM pgqueue.jobs WHERE payload->>'tag' = ANY($1) ORDER BY 1`,
        [tags],
      )
    ).rows;

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    // Every claim statement is logged with the application_name of the connection that ran it,
    // even one that claimed nothing: the proof that a node has looked at a paused queue.
    await t.pool.query(`
      CREATE TABLE claim_log (id bigserial PRIMARY KEY, app text NOT NULL);
      CREATE FUNCTION log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_query() LIKE '%SET state = ''active''%' THEN
          INSERT INTO public.claim_log (app) VALUES (current_setting('application_name'));
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER log_claims AFTER UPDATE ON pgqueue.jobs FOR EACH STATEMENT EXECUTE FUNCTION log_claim();`);
  });
  afterEach(async () => {
    releaseLong();
    for (const app of apps.splice(0).reverse()) await app.close();
  });

  it('hands back the jobs a node had prefetched, and they do not run when its slot frees', async () => {
    const a = await boot('node-a', ['pf', 'probe'], [PrefetchProcessor, ProbeProcessor]);
    // Only the pause may hand the buffered jobs back: the stale-buffer timer would do it a second
    // later too, and a slow machine took that long, so a broken pause hand-back still passed.
    disableStaleBufferHandBack(a, 'pf');
    const queues = a.get(QueueService);
    // Fast jobs first: the node learns its handlers are fast and starts prefetching.
    await queues.addBulk(
      'pf',
      Array.from({ length: 30 }, (_, i) => ({ name: 'fast', payload: { tag: `warm${i}` } })),
    );
    await waitFor(() => Array.from({ length: 30 }, (_, i) => `warm${i}`).every((tag) => ran.has(tag)), {
      message: 'warm-up jobs',
    });
    // A long job ahead of four fast ones: with one slot, the node runs the long one and buffers the rest.
    const buffered = ['after1', 'after2', 'after3', 'after4'];
    await queues.addBulk('pf', [
      { name: 'long', payload: { tag: 'long' } },
      ...buffered.map((tag) => ({ name: 'fast', payload: { tag } })),
    ]);
    await waitFor(async () => (await stateOf(['long', ...buffered])).filter((r) => r.state === 'active').length === 5, {
      message: 'the node to hold the long job and four prefetched ones',
    });

    await queues.getQueue('pf').pause();
    // The node's listener gets notifications in commit order: once the probe (enqueued after the
    // pause) has run, the node has handled the pause too. Only then does the long job end.
    await queues.add('probe', 'p', { tag: 'probe' });
    await waitFor(() => ran.has('probe'), { message: 'the probe job to run' });
    releaseLong();
    await waitFor(() => ran.has('long'));
    const allWaiting = async () => (await stateOf(buffered)).filter((r) => r.state === 'waiting').length === buffered.length;
    await waitFor(allWaiting, {
      message: async () => `the prefetched jobs to be back, waiting: ${JSON.stringify(await stateOf(buffered))}`,
    });
    expect(await stateOf(buffered)).toEqual(buffered.map((tag) => ({ tag, state: 'waiting', locked_by: null, attempt: 0 })));
    expect(buffered.filter((tag) => ran.has(tag))).toEqual([]);

    await queues.getQueue('pf').resume();
    await waitFor(() => buffered.every((tag) => ran.has(tag)), { message: 'the prefetched jobs to run after resume' });
  });

  it('holds across a node restart and for a node that boots while the queue is paused; resume runs the jobs', async () => {
    const a = await boot('node-a', ['held'], [HeldProcessor]);
    const queue = a.get(QueueService).getQueue('held');
    await queue.pause();
    const tags = ['held1', 'held2', 'held3'];
    await queue.addBulk(tags.map((tag) => ({ name: 'x', payload: { tag } })));
    await apps.pop()!.close();

    await t.pool.query('TRUNCATE claim_log');
    // The same node again, and a node that never saw the pause happen.
    const restarted = await boot('node-a-restarted', ['held'], [HeldProcessor]);
    await boot('node-b', ['held'], [HeldProcessor]);
    const claimsBy = async () =>
      new Set((await t.pool.query<{ app: string }>('SELECT DISTINCT app FROM claim_log')).rows.map((r) => r.app));
    await waitFor(
      async () => {
        const apps = await claimsBy();
        return apps.has('node-a-restarted') && apps.has('node-b');
      },
      { message: async () => `both nodes to have claimed (claims seen from: ${[...(await claimsBy())].join(', ')})` },
    );
    // Both claimed after the jobs were committed, and took nothing.
    expect((await stateOf(tags)).map((r) => r.state)).toEqual(['waiting', 'waiting', 'waiting']);
    expect(tags.filter((tag) => ran.has(tag))).toEqual([]);
    expect(await restarted.get(QueueService).getQueue('held').isPaused()).toBe(true);

    await restarted.get(QueueService).getQueue('held').resume();
    await waitFor(() => tags.every((tag) => ran.has(tag)), { message: 'the jobs to run after resume' });
  });
});
