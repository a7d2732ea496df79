import { Inject, Optional } from '@nestjs/common';
import { getQueueToken, INJECT_QUEUE_METADATA } from '../core/tokens';
import { validateQueueName } from '../core/pg-queue.options';

/** Where `@InjectQueue` put a queue: a constructor parameter (by index) or a property. */
export interface InjectQueueMetadata {
  readonly name: string;
  readonly index?: number;
  readonly property?: string | symbol;
}

/**
 * Injects the `Queue` of a queue registered with `PgQueueModule.registerQueue({ name })`.
 * A queue not registered (or registered in a module the class's module does not import) fails
 * the boot with a `PgQueueConfigError` that names the class and the queue: the injection is
 * optional to Nest, so that this library, not Nest's generic "can't resolve dependencies", says
 * what to change.
 */
export function InjectQueue(name: string): PropertyDecorator & ParameterDecorator {
  const inject = Inject(getQueueToken(validateQueueName(name)));
  return (target: object, key: string | symbol | undefined, index?: number) => {
    (inject as (t: object, k: string | symbol | undefined, i?: number) => void)(target, key, index);
    (Optional() as (t: object, k: string | symbol | undefined, i?: number) => void)(target, key, index);
    // A constructor parameter decorates the class; a property decorates its prototype.
    const owner = typeof target === 'function' ? target : target.constructor;
    const list = (Reflect.getOwnMetadata(INJECT_QUEUE_METADATA, owner) as InjectQueueMetadata[] | undefined) ?? [];
    const entry: InjectQueueMetadata = typeof index === 'number' ? { name, index } : { name, property: key };
    Reflect.defineMetadata(INJECT_QUEUE_METADATA, [...list, entry], owner);
  };
}
