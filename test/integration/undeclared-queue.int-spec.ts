import 'reflect-metadata';
import { Injectable, Module, type INestApplicationContext, type OnModuleInit } from '@nestjs/common';
import { InjectQueue, PgQueueConfigError, PgQueueModule, Queue, QueueService } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase } from '../support/database';

// Issue 10, point 3: a queue this app never declared is refused where it is named (enqueue, or
// @InjectQueue at boot), so a misspelt name cannot store jobs that no process will ever run.

@Injectable()
class MisspeltInjection {
  constructor(@InjectQueue('emial') readonly queue: Queue) {}
}

/** Enqueues at init, in a feature module: the check must come first (the module is global, its hooks run first). */
@Injectable()
class SeedsAtInit implements OnModuleInit {
  constructor(@InjectQueue('seeds') readonly queue: Queue) {}
  async onModuleInit() {
    await this.queue.add('seed', {});
  }
}

@Module({ providers: [SeedsAtInit] })
class SeedModule {}

@Injectable()
class PropertyInjection {
  @InjectQueue('nowhere') readonly queue!: Queue;
}

@Injectable()
class ReportsUser {
  constructor(@InjectQueue('reports') readonly reports: Queue) {}
}

/** Registers "reports", but only for itself: it exports it to modules that import it. */
@Module({ imports: [PgQueueModule.registerQueue({ name: 'reports' })] })
class ReportsModule {}

/** Injects "reports" without importing any module that provides it. */
@Module({ providers: [ReportsUser] })
class UnrelatedModule {}

describe('a queue this app never registered', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    // A producer-only process: it registers the queues it enqueues to, and runs no worker.
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'email' }] });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    await app?.close();
  });

  const storedJobs = async () => Number((await t.pool.query('SELECT count(*) AS n FROM pgqueue.jobs')).rows[0].n);

  it('QueueService.add, addBulk and getQueue refuse it at the call site, naming registerQueue; nothing is stored', async () => {
    const add = await queues.add('emial', 'welcome', { userId: 1 }).catch((e: unknown) => e);
    expect(add).toBeInstanceOf(PgQueueConfigError);
    expect((add as Error).message).toContain(`QueueService.add('emial'): queue "emial" is not registered`);
    expect((add as Error).message).toContain(`PgQueueModule.registerQueue({ name: 'emial' })`);
    expect((add as Error).message).toContain('workers: false');
    expect((add as Error).message).toContain('Registered queues: "email"');

    await expect(queues.addBulk('emial', [{ name: 'welcome', payload: {} }])).rejects.toThrow(PgQueueConfigError);
    expect(() => queues.getQueue('emial')).toThrow(/QueueService\.getQueue\('emial'\).*registerQueue\(\{ name: 'emial' \}\)/);
    expect(await storedJobs()).toBe(0);
  });

  it('a registered queue enqueues from a producer-only process; getJob(id) stays open to any id', async () => {
    const job = await queues.add('email', 'welcome', { userId: 2 });
    expect(await storedJobs()).toBe(1);
    expect((await queues.getJob(job.id))?.queue).toBe('email');
    expect(await queues.getJob('123456789')).toBeNull();
  });

  it("@InjectQueue of an unregistered queue fails the boot with the same kind of message, not Nest's", async () => {
    const ctor = await bootApp({ options: { connection: t.db.url, workers: false }, providers: [MisspeltInjection] }).catch(
      (e: unknown) => e,
    );
    expect(ctor).toBeInstanceOf(PgQueueConfigError);
    expect((ctor as Error).message).toContain(`@InjectQueue('emial') in MisspeltInjection: queue "emial" is not registered`);
    expect((ctor as Error).message).toContain(`PgQueueModule.registerQueue({ name: 'emial' })`);

    const prop = await bootApp({ options: { connection: t.db.url, workers: false }, providers: [PropertyInjection] }).catch(
      (e: unknown) => e,
    );
    expect(prop).toBeInstanceOf(PgQueueConfigError);
    expect((prop as Error).message).toContain(`@InjectQueue('nowhere') in PropertyInjection`);

    const atInit = await bootApp({ options: { connection: t.db.url, workers: false }, imports: [SeedModule] }).catch(
      (e: unknown) => e,
    );
    expect(atInit).toBeInstanceOf(PgQueueConfigError);
    expect((atInit as Error).message).toContain(`@InjectQueue('seeds') in SeedsAtInit: queue "seeds" is not registered`);
  });

  it("@InjectQueue of a queue registered only in a module the class's module does not import names that module", async () => {
    const err = await bootApp({
      options: { connection: t.db.url, workers: false },
      imports: [ReportsModule, UnrelatedModule],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect((err as Error).message).toContain(
      `@InjectQueue('reports') in ReportsUser: queue "reports" is registered, but not in a module that UnrelatedModule imports`,
    );
  });

  it('a deadLetterQueue that is not registered fails the boot and says what to do', async () => {
    const err = await bootApp({
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'main', deadLetterQueue: 'main-dead' }],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect((err as Error).message).toContain(`Queue "main" names deadLetterQueue "main-dead", which is not registered`);
    expect((err as Error).message).toContain(`PgQueueModule.registerQueue({ name: 'main-dead' })`);

    const ok = await bootApp({
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'main', deadLetterQueue: 'main-dead' }, { name: 'main-dead' }],
    });
    await ok.close();
  });
});
