import 'reflect-metadata';
import { Logger, Module, type INestApplicationContext, type ModuleMetadata } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { PgQueueModule, type PgQueueModuleOptions, type RegisterQueueOptions } from '../../lib';
import type { PgQueueRuntime } from '../../lib/module/pg-queue.runtime';
import { PG_QUEUE_RUNTIME } from '../../lib/module/pg-queue.constants';

export interface TestAppOptions {
  readonly options: PgQueueModuleOptions;
  readonly queues?: RegisterQueueOptions[];
  readonly providers?: ModuleMetadata['providers'];
  readonly imports?: ModuleMetadata['imports'];
}

/** Boots a Nest application context with the queue module, as an app would. */
export async function bootApp(t: TestAppOptions): Promise<INestApplicationContext> {
  @Module({
    imports: [...(t.imports ?? []), PgQueueModule.forRoot(t.options), PgQueueModule.registerQueue(...(t.queues ?? []))],
    providers: t.providers ?? [],
  })
  class TestAppModule {}
  return NestFactory.createApplicationContext(TestAppModule, {
    logger: process.env.PGQUEUE_TEST_LOGS ? new Logger() : false,
    abortOnError: false,
  });
}

export function runtimeOf(app: INestApplicationContext): PgQueueRuntime {
  return app.get<PgQueueRuntime>(PG_QUEUE_RUNTIME);
}
