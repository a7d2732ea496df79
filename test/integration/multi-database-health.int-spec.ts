import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TerminusModule } from '@nestjs/terminus';
import { PgQueueModule, Process, Processor } from '../../lib';
import { PgQueueHealthIndicator } from '../../lib/health';
import { runtimeOf } from '../support/app';
import { createTestDatabase, useTestDatabase, waitFor, type TestDatabase } from '../support/database';

// In an app of several connections, health says whose LISTEN connection is down: the bulk
// database's listener points at a port that refuses connections (port 1), the default one's is fine.

@Processor('app')
class AppProcessor {
  @Process()
  run() {}
}

@Processor('bulk')
class BulkProcessor {
  @Process()
  run() {}
}

describe('health over two databases', () => {
  const t = useTestDatabase();
  let bulkDb: TestDatabase;
  beforeAll(async () => {
    bulkDb = await createTestDatabase();
  });
  afterAll(async () => {
    await bulkDb?.drop();
  });

  it('names the connection whose listener is down, in the details and in the problem', async () => {
    @Module({
      imports: [
        TerminusModule,
        PgQueueModule.forRoot({
          connection: t.db.url,
          connections: { bulk: { connection: bulkDb.url, listenConnection: 'postgres://postgres@127.0.0.1:1/none' } },
        }),
        PgQueueModule.registerQueue({ name: 'app' }, { name: 'bulk', connection: 'bulk' }),
      ],
      providers: [AppProcessor, BulkProcessor, PgQueueHealthIndicator],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      await waitFor(() => runtimeOf(app).connections[0].supervisor.listenerState?.connected === true, {
        message: "the default connection's listener to connect",
      });
      const health = await app.get(PgQueueHealthIndicator).isHealthy('pgqueue', { listenerGraceMs: 0 });
      expect(health.pgqueue.status).toBe('down');
      expect(health.pgqueue.listener).toMatch(/^disconnected for \d+ ms \(connection "bulk"\)$/);
      expect(health.pgqueue.problems).toEqual([
        expect.stringMatching(/^listener of connection "bulk": LISTEN connection down for \d+ ms > listenerGraceMs 0/),
      ]);
    } finally {
      await app.close();
    }
  });
});
