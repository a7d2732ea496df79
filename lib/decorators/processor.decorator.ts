import { Injectable, SetMetadata } from '@nestjs/common';
import { PROCESSOR_METADATA } from '../core/tokens';
import { validateQueueName } from '../core/names';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';

/** Options of `@Processor`. */
export interface ProcessorOptions {
  /** The queue this class handles; it must be registered with `PgQueueModule.registerQueue`. */
  readonly name: string;
  /** Jobs run at once in this process; overrides the queue's `concurrency`. @default the queue's `concurrency` */
  readonly concurrency?: number;
}

/**
 * Marks a provider as the worker of a queue; its `@Process` methods handle the jobs.
 * Add the class to a module's `providers`.
 * @example
 * @Processor('email')
 * export class EmailProcessor {
 *   @Process('welcome') async welcome(job: Job<{ userId: number }>) {}
 * }
 */
export function Processor(nameOrOptions: string | ProcessorOptions): ClassDecorator {
  const options: ProcessorOptions = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : nameOrOptions;
  validateQueueName(options?.name);
  for (const k in options) {
    if (k !== 'name' && k !== 'concurrency') {
      throw new PgQueueConfigError(
        `@Processor(): unknown option ${quote(k)}. Use @Processor(name) or @Processor({ name, concurrency? }).`,
      );
    }
  }
  return (target) => {
    Injectable()(target);
    SetMetadata(PROCESSOR_METADATA, options)(target);
  };
}
