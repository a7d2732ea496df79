import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { PgQueueModuleOptions } from '../core/options/types';

/**
 * `forRoot` / `forRootAsync` from Nest's ConfigurableModuleBuilder; `isGlobal` (default true)
 * makes `QueueService` and the runtime visible to every module.
 */
const definition = new ConfigurableModuleBuilder<PgQueueModuleOptions>({ moduleName: 'PgQueue' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** The class `PgQueueModule` extends: it brings `forRoot` and `forRootAsync`. */
export const PgQueueConfigurableModule = definition.ConfigurableModuleClass;

/** What `forRoot` and `forRootAsync` take (the options, and `isGlobal`), for PgQueueModule's own. */
export type PgQueueForRootOptions = typeof definition.OPTIONS_TYPE;
export type PgQueueForRootAsyncOptions = typeof definition.ASYNC_OPTIONS_TYPE;

/**
 * The DI token of the module's options exactly as given to `forRoot` (or returned by
 * `forRootAsync`'s factory), before validation and defaults, which the queue applies once at boot.
 * Inject it to read them back, e.g. in a provider of your own.
 * @example constructor(@Inject(PG_QUEUE_MODULE_OPTIONS) private readonly options: PgQueueModuleOptions) {}
 */
export const PG_QUEUE_MODULE_OPTIONS = definition.MODULE_OPTIONS_TOKEN;
