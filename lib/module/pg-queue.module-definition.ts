import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { PgQueueModuleOptions } from '../core/options/types';

/**
 * `forRoot` / `forRootAsync` from Nest's ConfigurableModuleBuilder. `PG_QUEUE_MODULE_OPTIONS` is
 * the DI token of the raw options as given (validated and defaulted once, by the runtime);
 * `isGlobal` (default true) makes `QueueService` and the runtime visible to every module.
 */
export const {
  ConfigurableModuleClass: PgQueueConfigurableModule,
  MODULE_OPTIONS_TOKEN: PG_QUEUE_MODULE_OPTIONS,
  OPTIONS_TYPE: PG_QUEUE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: PG_QUEUE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<PgQueueModuleOptions>({ moduleName: 'PgQueue' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
