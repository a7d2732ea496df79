import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { getQueueToken, type JobScheduler, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { cli } from '../support/cli';
import { useTestDatabase } from '../support/database';

// `npx nestjs-pg-queue schedulers list|pause|resume|remove` (issue 28 point 3) on a real database:
// the queue's own calls, exit code 1 for an id the queue has none of, remove confirmed.

describe('nestjs-pg-queue schedulers', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'reports' }] });
    queue = app.get<Queue>(getQueueToken('reports'));
    await queue.upsertJobScheduler('report:tenant-42', { pattern: '0 3 * * *', tz: 'Europe/Berlin' }, { name: 'report' });
    await queue.upsertJobScheduler('poll', { every: 90_000, startDate: '2099-01-01' }, { name: 'poll' });
  });
  afterAll(() => app?.close());

  it('lists, pauses, resumes and removes; an unknown id exits 1; `schedulers` alone names its subcommands', async () => {
    const list = await cli(t.db.url, ['schedulers', 'list', '--queue', 'reports']);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/report:tenant-42\s+report\s+0 3 \* \* \* \(Europe\/Berlin\)/);
    expect(list.out).toMatch(/poll\s+poll\s+every 1m ?30s/);
    const json = await cli(t.db.url, ['schedulers', 'list', '--queue', 'reports', '--json']);
    expect(json.json<{ schedulers: JobScheduler[] }>().schedulers.map((s) => s.id)).toEqual(['report:tenant-42', 'poll']);

    expect((await cli(t.db.url, ['schedulers', 'pause', 'poll', '--queue', 'reports'])).code).toBe(0);
    expect((await queue.getJobScheduler('poll'))!.paused).toBe(true);
    expect((await cli(t.db.url, ['schedulers', 'resume', 'poll', '--queue', 'reports'])).code).toBe(0);
    expect((await queue.getJobScheduler('poll'))!.paused).toBe(false);
    const missing = await cli(t.db.url, ['schedulers', 'pause', 'nope', '--queue', 'reports']);
    expect([missing.code, missing.out]).toEqual([1, 'Queue "reports" has no job scheduler "nope".']);

    // Remove asks first: without --yes and no terminal, nothing is removed.
    const refused = await cli(t.db.url, ['schedulers', 'remove', 'poll', '--queue', 'reports']);
    expect(refused.code).not.toBe(0);
    expect(await queue.getJobScheduler('poll')).not.toBeNull();
    expect((await cli(t.db.url, ['schedulers', 'remove', 'poll', '--queue', 'reports', '--yes'])).code).toBe(0);
    expect(await queue.getJobScheduler('poll')).toBeNull();

    const bare = await cli(t.db.url, ['schedulers']);
    expect(bare.code).toBe(2);
    expect(bare.err).toMatch(/`schedulers` needs one of list, pause, resume, remove/);
  });
});
