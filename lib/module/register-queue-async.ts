import type { InjectionToken, ModuleMetadata, OptionalFactoryDependency } from '@nestjs/common';
import type { RegisterQueueOptions } from '../core/options/types';

/**
 * Options of `PgQueueModule.registerQueueAsync`: a queue whose options come from other providers
 * (a ConfigService), as `forRootAsync` does for the module. The factory's result is validated at
 * boot exactly as `registerQueue`'s options are, with the same messages.
 * @example
 * PgQueueModule.registerQueueAsync({
 *   name: 'email',
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ concurrency: config.get('EMAIL_CONCURRENCY') }),
 * })
 */
export interface RegisterQueueAsyncOptions {
  /**
   * The queue's name, known when the module graph is declared (so `@InjectQueue(name)` and
   * `@Processor(name)` resolve); the factory may repeat it but not change it.
   */
  readonly name: string;
  /** Modules whose providers the factory injects. @default [] */
  readonly imports?: ModuleMetadata['imports'];
  /** The factory's arguments, by token. @default [] */
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** The queue's options (every `registerQueue` option but `name`, which it may repeat). */
  readonly useFactory: (
    ...args: never[]
  ) => (Omit<RegisterQueueOptions, 'name'> & { name?: string }) | Promise<Omit<RegisterQueueOptions, 'name'> & { name?: string }>;
}
