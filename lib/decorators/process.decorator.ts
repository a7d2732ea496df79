import { SetMetadata } from '@nestjs/common';
import { PROCESS_METADATA } from '../pg-queue.constants';
import { validateJobName } from '../pg-queue.options';

/** What `@Process` stores: the job name, or null for the queue's catch-all handler. */
export interface ProcessMetadata {
  readonly name: string | null;
}

/**
 * Marks a method of a `@Processor` class as the handler of one job name. Without a name it
 * handles every job of the queue that has no handler of its own. What the method returns is
 * stored as the job's result; what it throws fails the attempt.
 */
export function Process(name?: string): MethodDecorator {
  if (name !== undefined) validateJobName(name);
  return SetMetadata(PROCESS_METADATA, { name: name ?? null } satisfies ProcessMetadata);
}
