import { Inject } from '@nestjs/common';
import { getQueueToken } from '../module/pg-queue.constants';
import { validateQueueName } from '../core/pg-queue.options';

/** Injects the `Queue` of a queue registered with `PgQueueModule.registerQueue({ name })`. */
export function InjectQueue(name: string): PropertyDecorator & ParameterDecorator {
  return Inject(getQueueToken(validateQueueName(name)));
}
