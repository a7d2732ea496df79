import 'reflect-metadata';
import { Logger, Module, type INestApplicationContext, type ModuleMetadata } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { PgQueueModule, type PgQueueModuleOptions, type RegisterQueueOptions } from '../../lib';
import type { PgQueueRuntime } from '../../lib/module/pg-queue.runtime';
import { PG_QUEUE_RUNTIME } from '../../lib/module/pg-queue.constants';
import { pooledOptions } from './pgbouncer';

export interface TestAppOptions {
  readonly options: PgQueueModuleOptions;
  readonly queues?: RegisterQueueOptions[];
  readonly providers?: ModuleMetadata['providers'];
  readonly imports?: ModuleMetadata['imports'];
}

/**
 * Boots a Nest application context with the queue module, as an app would. Under `npm test` with
 * PGQUEUE_TEST_PGBOUNCER, the queue's connection goes through PgBouncer (see ./pgbouncer.ts).
 */
export async function bootApp(t: TestAppOptions): Promise<INestApplicationContext> {
  @Module({
    imports: [
      ...(t.imports ?? []),
      PgQueueModule.forRoot(pooledOptions(t.options)),
      PgQueueModule.registerQueue(...(t.queues ?? [])),
    ],
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

/**
 * Turns off a worker's stale-buffer hand-back (prefetched jobs that waited over a second go back
 * to the queue), so that a test of another hand-back (a pause) fails when that one breaks, however
 * slow the machine: left on, the timer hands the same jobs back about a second later and the test
 * passed anyway. Reaches into the supervisor's private worker map; says so when that moved.
 */
export function disableStaleBufferHandBack(app: INestApplicationContext, queue: string): void {
  const workers = (runtimeOf(app).supervisor as unknown as { workers?: Map<string, { returnStaleBuffer?: () => void }> }).workers;
  const worker = workers?.get(queue);
  if (typeof worker?.returnStaleBuffer !== 'function') {
    throw new Error(
      `disableStaleBufferHandBack: no worker for "${queue}" with a returnStaleBuffer method in the supervisor's ` +
        '"workers" map: the worker was reshaped, update this helper (test/support/app.ts)',
    );
  }
  worker.returnStaleBuffer = () => undefined;
}
