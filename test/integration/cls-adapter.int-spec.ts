import 'reflect-metadata';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { ClsModule, ClsService } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, type TransactionalAdapter } from '@nestjs-cls/transactional';
import { InjectQueue, PgQueueConfigError, type Queue } from '../../lib';
import { bootApp } from '../support/app';
import { useTestDatabase } from '../support/database';

// A @nestjs-cls/transactional adapter whose transaction cannot run our SQL (Prisma, Knex, ...):
// add() inside its @Transactional() must fail and say what to install, not enqueue on the pool,
// where the job would outlive a rollback.

/** Stands for such an adapter: its tx has neither getRepository() nor query(). */
const opaqueAdapter: TransactionalAdapter<object, { $executeRaw(): void }, object> = {
  connection: {},
  optionsFactory: () => ({
    wrapWithTransaction: async (_options, fn, setTx) => {
      setTx({ $executeRaw: () => undefined });
      return fn();
    },
    getFallbackInstance: () => ({ $executeRaw: () => undefined }),
  }),
};

@Injectable()
class Signup {
  constructor(@InjectQueue('welcome') private readonly welcome: Queue<{ greet: { userId: number } }>) {}

  @Transactional()
  async register(userId: number): Promise<void> {
    await this.welcome.add('greet', { userId });
  }
}

describe('implicit transaction of an adapter nestjs-pg-queue cannot join', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;

  beforeAll(async () => {
    app = await bootApp({
      imports: [ClsModule.forRoot({ global: true, plugins: [new ClsPluginTransactional({ adapter: opaqueAdapter })] })],
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'welcome' }],
      providers: [Signup],
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('add() in its @Transactional() throws, naming the adapters to install, and writes no job', async () => {
    const attempt = app.get(ClsService).run(() => app.get(Signup).register(7));
    await expect(attempt).rejects.toThrow(PgQueueConfigError);
    await expect(app.get(ClsService).run(() => app.get(Signup).register(7))).rejects.toThrow(
      'npm install @nestjs-cls/transactional-adapter-typeorm, or @nestjs-cls/transactional-adapter-pg',
    );
    const { rows } = await t.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgqueue.jobs WHERE queue = 'welcome'`);
    expect(rows[0].n).toBe(0);
  });
});
