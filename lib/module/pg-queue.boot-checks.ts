import { PgQueueConfigError } from '../core/errors';
import type { FoundInjection } from '../discovery/pg-queue.explorer';
import { notRegisteredMessage, type PgQueueRuntime } from './pg-queue.runtime';

// What the boot checks once every provider exists, before anything runs: each misuse fails the
// boot with a message that says what to change, instead of a job that waits for ever.

/**
 * Every `@InjectQueue` must have got its queue: the queue is not registered at all, or is
 * registered in a module the class's module does not import.
 */
export function checkInjectedQueues(runtime: PgQueueRuntime, found: readonly FoundInjection[]): void {
  const registered = runtime.registeredQueues.map((q) => q.name);
  for (const inj of found) {
    if (!runtime.queueOptions(inj.name)) throw new PgQueueConfigError(notRegisteredMessage(inj.name, registered, inj.where));
    if (inj.injected === false) {
      const { host } = inj;
      throw new PgQueueConfigError(
        `${inj.where}: queue "${inj.name}" is registered, but not in a module that ${host} imports, so Nest cannot inject it ` +
          `there. Add PgQueueModule.registerQueue({ name: '${inj.name}' }) to the imports of ${host} (with the same ` +
          `options), or export that registerQueue(...) from a module ${host} imports.`,
      );
    }
  }
}

/**
 * Throws when a registered queue names a deadLetterQueue this app does not register: its
 * failed jobs would move to a queue no process declares, where nothing runs or shows them.
 */
export function checkDeadLetterQueues(runtime: PgQueueRuntime): void {
  for (const q of runtime.registeredQueues) {
    if (q.deadLetterQueue === null) continue;
    const dlq = runtime.queueOptions(q.deadLetterQueue);
    if (!dlq) {
      throw new PgQueueConfigError(
        `Queue "${q.name}" names deadLetterQueue "${q.deadLetterQueue}", which is not registered in this app. ` +
          `Add PgQueueModule.registerQueue({ name: '${q.deadLetterQueue}' }) to the imports of a module (with a @Processor ` +
          `for it where its jobs should run), or remove deadLetterQueue from "${q.name}".`,
      );
    }
    // The move to the dead-letter queue is one statement in the failing job's database: across
    // two databases it could not be atomic (a crash between them would lose or double the job).
    if (dlq.connection !== q.connection) {
      throw new PgQueueConfigError(
        `Queue "${q.name}" (connection "${q.connection}") names deadLetterQueue "${dlq.name}", which is on connection ` +
          `"${dlq.connection}": a failed job moves to its dead-letter queue in one statement of its own database. ` +
          `Put both queues on one connection, or name a dead-letter queue registered on "${q.connection}" ` +
          '(a dead-letter queue per database).',
      );
    }
  }
}
