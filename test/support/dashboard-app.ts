import 'reflect-metadata';
import { Module, type INestApplication, type ModuleMetadata } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { PgQueueModule, type PgQueueModuleOptions, type RegisterQueueOptions } from '../../lib';

/** The two HTTP platforms the dashboard supports; integration tests run on each. */
export const PLATFORMS = ['express', 'fastify'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** Boots an HTTP app (not yet listening; supertest drives its server) with the queue module and `imports`. */
export async function bootHttpApp(
  platform: Platform,
  t: {
    options: PgQueueModuleOptions;
    queues?: RegisterQueueOptions[];
    imports?: ModuleMetadata['imports'];
    providers?: ModuleMetadata['providers'];
  },
): Promise<INestApplication> {
  @Module({
    imports: [PgQueueModule.forRoot(t.options), PgQueueModule.registerQueue(...(t.queues ?? [])), ...(t.imports ?? [])],
    providers: t.providers ?? [],
  })
  class HttpTestModule {}
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(HttpTestModule, adapter, {
    logger: process.env.PGQUEUE_TEST_LOGS ? undefined : false,
    abortOnError: false,
  });
  await app.init();
  if (platform === 'fastify') await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
  return app;
}
