import { Inject } from '@nestjs/common';
import { getQueueToken } from '../pg-queue.constants';
import { validateQueueName } from '../pg-queue.options';

/** Injects the `Queue` of a queue registered with `PgQueueModule.registerQueue({ name })`. */
export function InjectQueue(name: string): PropertyDecorator & ParameterDecorator {
  return Inject(getQueueToken(validateQueueName(name)));
}
