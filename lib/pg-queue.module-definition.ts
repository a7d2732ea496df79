import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { PgQueueModuleOptions } from './pg-queue.options';

export const {
  ConfigurableModuleClass: PgQueueConfigurableModule,
  MODULE_OPTIONS_TOKEN: PG_QUEUE_MODULE_OPTIONS,
  OPTIONS_TYPE: PG_QUEUE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: PG_QUEUE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<PgQueueModuleOptions>({ moduleName: 'PgQueue' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
