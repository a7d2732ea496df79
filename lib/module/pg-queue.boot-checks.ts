import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import type { ResolvedSchedule } from '../core/cron-schedule';
import type { FoundInjection, FoundListener, FoundProcessor } from '../discovery/pg-queue.explorer';
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

/**
 * Every `@OnQueueEvent(event, { queue })` and `@OnWorkerEvent` must name a registered queue: a typo ('emial') would
 * subscribe to nothing, for ever, without a word.
 */
export function checkListenerQueues(runtime: PgQueueRuntime, listeners: readonly FoundListener[]): void {
  const registered = runtime.registeredQueues.map((q) => q.name);
  for (const l of listeners) {
    if (l.queue === undefined || runtime.queueOptions(l.queue)) continue;
    throw new PgQueueConfigError(
      notRegisteredMessage(
        l.queue,
        registered,
        `${l.kind === 'queue' ? '@OnQueueEvent' : '@OnWorkerEvent'}('${l.event}', { queue }) on ${l.where}`,
      ) + ' Name a registered queue, or leave queue out to hear every queue.',
    );
  }
}

/**
 * Warns (the boot goes on: another process may run these jobs) about what this app's workers
 * will not run: a registered queue with no `@Processor`, a schedule whose job no `@Process`
 * handles. Both are usual in an app split in processes, and a typo in one.
 */
export function warnUnhandled(
  runtime: PgQueueRuntime,
  found: ReadonlyMap<string, FoundProcessor>,
  schedules: readonly ResolvedSchedule[],
  logger: { warn(message: string): void },
): void {
  const idle = runtime.registeredQueues.filter((q) => !found.has(q.name)).map((q) => `"${q.name}"`);
  if (idle.length) {
    logger.warn(
      `Queue(s) ${idle.join(', ')} registered with workers on, but no @Processor of this app handles them: their jobs ` +
        `wait until another process runs them. Add a @Processor('name') class to a module's providers, or set ` +
        `workers: false in an app that only adds jobs.`,
    );
  }
  for (const s of schedules) {
    const f = found.get(s.queue);
    if (f && (f.handlers.has(s.name) || f.batches.has(s.name) || f.catchAll)) continue;
    logger.warn(
      `Recurring job ${quote(s.name)} of queue "${s.queue}" (${s.cron}) has no @Process('${s.name}') in a worker of this ` +
        `app: each tick adds a job that only another process can run. Add the handler, or fix the job name.`,
    );
  }
}
