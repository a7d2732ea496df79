import { Injectable, SetMetadata } from '@nestjs/common';
import { PROCESSOR_METADATA } from '../module/pg-queue.constants';
import { validateQueueName } from '../core/pg-queue.options';

/** Options of `@Processor`. */
export interface ProcessorOptions {
  /** The queue this class handles; it must be registered with `PgQueueModule.registerQueue`. */
  readonly name: string;
  /** Jobs run at once in this process; overrides the queue's `concurrency`. */
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
  return (target) => {
    Injectable()(target);
    SetMetadata(PROCESSOR_METADATA, options)(target);
  };
}
