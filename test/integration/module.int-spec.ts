import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Client } from 'pg';
import {
  getQueueToken,
  InjectQueue,
  PgQueueModule,
  Process,
  Processor,
  Queue,
  QueueService,
  type Job,
  type PgQueueModuleOptions,
} from '../../lib';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';

const handled: string[] = [];

@Processor({ name: 'reports', concurrency: 2 })
class ReportsProcessor {
  @Process('build')
  build(job: Job<{ title: string }>) {
    handled.push(job.payload.title);
    return { pages: job.payload.title.length };
  }
}

@Injectable()
class ReportsService {
  constructor(@InjectQueue('reports') readonly reports: Queue<{ build: { title: string } }>) {}
}

@Module({ imports: [PgQueueModule.registerQueue({ name: 'reports' })], providers: [ReportsProcessor, ReportsService] })
class ReportsModule {}

/** A second feature module registering the same queue with the same options is fine. */
@Module({ imports: [PgQueueModule.registerQueue({ name: 'reports' })] })
class OtherFeatureModule {}

describe('PgQueueModule wiring', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('forRootAsync with an injected TypeORM DataSource, queues registered in feature modules', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        PgQueueModule.forRootAsync({
          inject: [DataSource],
          useFactory: (dataSource: DataSource) => ({ dataSource, pollIntervalMs: 200 }),
        }),
        ReportsModule,
        OtherFeatureModule,
        PgQueueModule.registerQueue({ name: 'other' }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    try {
      const reports = app.get(ReportsService).reports;
      expect(app.get(getQueueToken('reports'))).toBe(reports);
      const job = await reports.add('build', { title: 'q3' }, { priority: -1 });
      expect(job).toMatchObject({ queue: 'reports', name: 'build', state: 'waiting', priority: -1, attempt: 0, maxAttempts: 3 });
      await waitFor(async () => (await reports.getJob(job.id))?.state === 'completed');
      expect((await reports.getJob(job.id))!.result).toEqual({ pages: 2 });
      expect(handled).toEqual(['q3']);
      // getJob of a queue only answers for its own jobs.
      expect(await app.get(QueueService).getQueue('other').getJob(job.id)).toBeNull();
    } finally {
      await app.close();
    }
  });

  describe('forRootAsync with an options factory class', () => {
    /** Where the options come from: a provider of the app's own config module. */
    @Injectable()
    class AppConfig {
      get databaseUrl(): string {
        return db.url;
      }
    }
    @Module({ providers: [AppConfig], exports: [AppConfig] })
    class AppConfigModule {}

    /** Nest's ConfigurableModuleBuilder calls `create()` on the class. */
    @Injectable()
    class QueueOptionsFactory {
      constructor(private readonly config: AppConfig) {}
      create(): PgQueueModuleOptions {
        return { connection: this.config.databaseUrl, schema: 'from_factory', pollIntervalMs: 200 };
      }
    }
    @Module({ imports: [AppConfigModule], providers: [QueueOptionsFactory], exports: [QueueOptionsFactory] })
    class QueueConfigModule {}

    const history = async () => {
      const c = new Client({ connectionString: db.url });
      await c.connect();
      try {
        return (await c.query(`SELECT name, payload->>'title' AS title FROM from_factory.job_history ORDER BY id`)).rows;
      } finally {
        await c.end();
      }
    };

    it.each(['useClass', 'useExisting'] as const)('%s: boots with the options the class creates, and uses them', async (how) => {
      const root =
        how === 'useClass'
          ? PgQueueModule.forRootAsync({ imports: [AppConfigModule], useClass: QueueOptionsFactory })
          : PgQueueModule.forRootAsync({ imports: [QueueConfigModule], useExisting: QueueOptionsFactory });
      @Module({ imports: [root, ReportsModule] })
      class AppModule {}
      handled.length = 0;
      const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
      try {
        const reports = app.get(ReportsService).reports;
        const job = await reports.add('build', { title: how });
        await waitFor(async () => (await reports.getJob(job.id))?.state === 'completed');
        expect(handled).toEqual([how]);
        // The job went through the schema the factory named, on the connection it read from config.
        expect(await history()).toEqual(expect.arrayContaining([{ name: 'build', title: how }]));
      } finally {
        await app.close();
      }
    });
  });

  it('forRootAsync with a plain factory and connection string; priorities order the claim', async () => {
    @Module({
      imports: [
        PgQueueModule.forRootAsync({ useFactory: async () => ({ connection: db.url, schema: 'async_conn', workers: false }) }),
        ReportsModule,
      ],
    })
    class ProducerModule {}
    const producer = await NestFactory.createApplicationContext(ProducerModule, { logger: false, abortOnError: false });
    const titles = ['low', 'high', 'mid'];
    const prio = { low: 10, high: -5, mid: 0 } as const;
    for (const t of titles)
      await producer.get(QueueService).add('reports', 'build', { title: t }, { priority: prio[t as keyof typeof prio] });
    await producer.close();

    handled.length = 0;
    @Module({
      imports: [
        PgQueueModule.forRoot({ connection: db.url, schema: 'async_conn' }),
        PgQueueModule.registerQueue({ name: 'reports', concurrency: 1 }),
      ],
      providers: [ReportsProcessor],
    })
    class SerialWorker {}
    // @Processor's concurrency (2) wins over the queue's; the claim still orders by priority.
    const worker = await NestFactory.createApplicationContext(SerialWorker, { logger: false, abortOnError: false });
    try {
      await waitFor(() => handled.length === 3, { message: 'three reports' });
      expect(handled.indexOf('high')).toBeLessThan(handled.indexOf('low'));
      expect(handled.indexOf('mid')).toBeLessThan(handled.indexOf('low'));
    } finally {
      await worker.close();
    }
  });
});
