import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { createServer, type Server, type Socket } from 'node:net';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { PgQueueConfigError, PgQueueModule, QueueService, type PgQueueModuleOptions } from '../../lib';
import { createTestDatabase, type TestDatabase } from '../support/database';

// Issue 24, points 2 and 3: a boot pointed at something that is not PostgreSQL fails with a
// message naming host and port and what answered, instead of hanging; a reused DataSource's
// settings (replication master, applicationName) reach the queue's own connections.

/** A loopback server doing `onSocket` with each connection; sockets destroyed on close. */
async function fakeServer(onSocket: (s: Socket) => void): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    onSocket(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Boots an app with `options`, closes it if it booted, and answers the boot's error. */
async function bootError(options: PgQueueModuleOptions): Promise<Error> {
  @Module({ imports: [PgQueueModule.forRoot(options), PgQueueModule.registerQueue({ name: 'probe' })] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false }).catch(
    (err: Error) => err,
  );
  if (app instanceof Error) return app;
  await app.close();
  throw new Error('the app booted');
}

describe('a connection that is not PostgreSQL fails the boot, saying what answered', () => {
  it('a server that accepts and never answers: fails after connectTimeoutMs, naming host and port', async () => {
    const silent = await fakeServer(() => undefined);
    try {
      const err = await bootError({ connection: { host: '127.0.0.1', port: silent.port, user: 'x' }, connectTimeoutMs: 300 });
      expect(err).toBeInstanceOf(PgQueueConfigError);
      expect(err.message).toContain(`at 127.0.0.1:${silent.port}: something answered but it is not PostgreSQL`);
      expect(err.message).toContain("said nothing to PostgreSQL's handshake within 300 ms");
    } finally {
      await silent.close();
    }
  });

  it('a server that sends something else (a Redis error line): quotes what it sent', async () => {
    const redisLike = await fakeServer((s) => s.end('-ERR unknown command\r\n'));
    try {
      const err = await bootError({ connection: `postgres://x@127.0.0.1:${redisLike.port}/db`, connectTimeoutMs: 300 });
      expect(err).toBeInstanceOf(PgQueueConfigError);
      expect(err.message).toContain(
        `at 127.0.0.1:${redisLike.port}: something answered but it is not PostgreSQL (it sent "-ERR unknown command\\x0d\\x0a")`,
      );
    } finally {
      await redisLike.close();
    }
  });

  it('a server that accepts and closes at once: says so', async () => {
    const closer = await fakeServer((s) => s.destroy());
    try {
      const err = await bootError({ connection: { host: '127.0.0.1', port: closer.port }, connectTimeoutMs: 300 });
      expect(err).toBeInstanceOf(PgQueueConfigError);
      expect(err.message).toContain(`at 127.0.0.1:${closer.port}: something answered but it is not PostgreSQL (it accepted`);
    } finally {
      await closer.close();
    }
  });

  it('nothing listening: says the connection was refused', async () => {
    const gone = await fakeServer(() => undefined);
    const port = gone.port;
    await gone.close();
    const err = await bootError({ connection: { host: '127.0.0.1', port }, connectTimeoutMs: 300 });
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect(err.message).toContain(`at 127.0.0.1:${port}: nothing listens there (connection refused)`);
  });
});

describe('a reused DataSource gives the queue every connection setting TypeORM uses', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('replication: the master, its database, and applicationName in pg_stat_activity', async () => {
    const u = new URL(db.url);
    const master = {
      host: u.hostname,
      port: Number(u.port || 5432),
      username: decodeURIComponent(u.username),
      password: decodeURIComponent(u.password),
      database: db.name,
    };
    // The queue never uses a replica: this one is a loopback port where nothing listens.
    const dataSource = new DataSource({
      type: 'postgres',
      replication: { master, slaves: [{ ...master, host: '127.0.0.1', port: 1 }] },
      applicationName: 'p1-replicated-app',
    });
    @Module({
      imports: [PgQueueModule.forRoot({ dataSource, listen: false }), PgQueueModule.registerQueue({ name: 'replicated' })],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    const admin = new Client({ connectionString: db.url });
    await admin.connect();
    try {
      const job = await app.get(QueueService).getQueue('replicated').add('x', { n: 1 });
      const stored = await admin.query(`SELECT queue FROM pgqueue.jobs WHERE id = $1`, [job.id]);
      expect(stored.rows).toEqual([{ queue: 'replicated' }]);
      const sessions = await admin.query(
        `SELECT DISTINCT datname FROM pg_stat_activity WHERE application_name = 'p1-replicated-app:nestjs-pg-queue'`,
      );
      expect(sessions.rows).toEqual([{ datname: db.name }]);
    } finally {
      await admin.end();
      await app.close();
    }
  });
});
