import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    throw new Error(
      'Set DATABASE_URL, e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres, ' +
        'or run `npm start`, which starts an embedded PostgreSQL when DATABASE_URL is unset.',
    );
  }
  const port = Number(process.env.PORT ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`PORT must be a TCP port number (0-65535), got ${JSON.stringify(process.env.PORT)}.`);
  }

  const app = await NestFactory.create(AppModule.forRoot(databaseUrl));
  // On SIGINT/SIGTERM: stop taking jobs, let running ones finish, then close the pools.
  app.enableShutdownHooks();
  await app.listen(port, '127.0.0.1'); // this machine only: it is a demo

  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const json = `-H 'content-type: application/json'`;
  new Logger('Sample').log(
    [
      `Listening on ${base}. Try:`,
      `  ${base}/queues in a browser: the dashboard (queues, jobs, nodes; for this machine only)`,
      `  curl -s -X POST ${base}/orders ${json} -d '{"item":"book"}'`,
      `  curl -s ${base}/orders/1`,
      `  curl -s -X POST ${base}/orders ${json} -d '{"item":"lamp","fail":true}'`,
      `  curl -s -X POST ${base}/orders ${json} -d '{"item":"unobtainium"}'   # its warehouse job ends failed`,
      `  curl -s ${base}/health`,
      `  curl -s ${base}/metrics`,
    ].join('\n'),
  );
}

bootstrap().catch((err: unknown) => {
  new Logger('Sample').error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
