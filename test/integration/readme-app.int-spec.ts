import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { INestApplicationContext, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import * as ts from 'typescript';
import { assertBuilt } from '../support/built';
import { useTestDatabase, waitFor } from '../support/database';
import { COMPILER_OPTIONS, exampleAppFiles, ROOT } from '../support/readme';

/**
 * The example app of docs/getting-started.md (the README shows two of its files), run as a user
 * would run it: its files written to a folder as they stand, compiled, with `nestjs-pg-queue`
 * resolving to this package (its build in dist/, through a node_modules link), booted on a real
 * PostgreSQL. Placing an order must send its email through the queue.
 */
describe('the getting-started example app, run', () => {
  const ctx = useTestDatabase();
  let dir = '';
  let app: INestApplicationContext | undefined;
  const savedUrl = process.env.DATABASE_URL;

  beforeAll(() => {
    assertBuilt();
    dir = mkdtempSync(join(ROOT, 'test', '.readme-app-'));
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(ROOT, join(dir, 'node_modules', 'nestjs-pg-queue'), 'dir');
    const files = exampleAppFiles();
    for (const b of files) {
      const out = ts.transpileModule(b.code, { compilerOptions: { ...COMPILER_OPTIONS, noEmit: false, paths: undefined } });
      const path = join(dir, b.file!.replace(/\.ts$/, '.js'));
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, out.outputText);
    }
  });

  afterAll(async () => {
    await app?.close();
    if (savedUrl === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = savedUrl;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('places an order, and the order-confirmation job sends its email', async () => {
    process.env.DATABASE_URL = ctx.db.url; // what app.module.ts reads
    const { AppModule } = require(join(dir, 'src', 'app.module.js')) as { AppModule: Type };
    const { OrdersService } = require(join(dir, 'src', 'orders.service.js')) as {
      OrdersService: Type<{ placeOrder(item: string): Promise<{ id: number }> }>;
    };
    const { Mailer } = require(join(dir, 'src', 'mailer.service.js')) as {
      Mailer: Type<{ sendConfirmation(id: number): Promise<void> }>;
    };
    app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
    await app.init();

    const sent: number[] = [];
    const mailer = app.get(Mailer);
    const send = mailer.sendConfirmation.bind(mailer);
    mailer.sendConfirmation = async (orderId: number) => {
      await send(orderId);
      sent.push(orderId);
    };

    const order = await app.get(OrdersService).placeOrder('book');
    expect(order.id).toEqual(expect.any(Number));
    await waitFor(() => sent.includes(order.id), { timeoutMs: 15_000, message: 'the confirmation email was not sent' });
    await waitFor(
      async () =>
        (await ctx.pool.query(`SELECT 1 FROM pgqueue.job_history WHERE queue = 'email' AND state = 'completed'`)).rowCount === 1,
      { timeoutMs: 15_000, message: 'the email job did not end completed' },
    );
    const { rows } = await ctx.pool.query(`SELECT item FROM orders`);
    expect(rows).toEqual([{ item: 'book' }]);
  });
});
