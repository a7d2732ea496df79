import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import { resolveQueueOptions } from '../core/options/module-checks';
import { checkBatchConcurrency } from '../core/batch';
import { PgQueueExplorer, type FoundListener, type FoundProcessor } from '../discovery/pg-queue.explorer';
import type { QueueEventName, QueueEvents } from '../core/queue-events';
import type { WorkerEventName } from '../decorators/on-worker-event.decorator';
import type { ResolvedSchedule } from '../core/cron-schedule';
import { reconcileCodeSchedulers } from '../producer/code-schedulers';
import { checkDeadLetterQueues, checkInjectedQueues, checkListenerQueues, warnUnhandled } from './pg-queue.boot-checks';
import { PG_QUEUE_RUNTIME } from './pg-queue.constants';
import type { PgQueueRuntime } from './pg-queue.runtime';

/**
 * Starts and stops the runtime with the app: checks what discovery found against the registered
 * queues, hands each processor's handlers to its database's supervisor and starts the workers at
 * bootstrap; stops them first thing at shutdown, before other providers tear down what jobs use.
 */
@Injectable()
export class PgQueueLifecycle implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger('PgQueue');

  constructor(
    private readonly explorer: PgQueueExplorer,
    @Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime,
  ) {}

  /** Checks, once every provider exists, what can be checked before anything runs. */
  onModuleInit(): Promise<void> {
    try {
      checkDeadLetterQueues(this.runtime);
      checkInjectedQueues(this.runtime, this.explorer.findInjectedQueues());
      return Promise.resolve();
    } catch (err) {
      // A failed boot must not leave the pool's connections open behind it.
      return this.runtime.close().then(() => Promise.reject(err as Error));
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    let found: Map<string, FoundProcessor>;
    let subscriptions: QueueEvents[];
    try {
      // Look up the optional CLS transaction host now, when every provider exists, rather than on
      // the first add(): loading that package cost the first enqueue tens of milliseconds (bench/).
      this.runtime.ambientTransaction();
      found = this.explorer.findProcessors((queue) => this.runtime.queueOptions(queue) !== undefined);
      const listeners = this.explorer.findEventListeners();
      checkListenerQueues(this.runtime, listeners);
      subscriptions = this.subscribe(listeners);
    } catch (err) {
      // A failed boot must not leave the pool's connections open behind it.
      await this.runtime.close();
      throw err;
    }
    // @OnQueueEvent methods hear every event committed once the boot returns: wait for their LISTEN
    // (bounded: a listener that cannot connect yet keeps retrying, and says so in its log).
    const timeoutMs = this.runtime.options.connectTimeoutMs;
    const late = await Promise.all(
      subscriptions.map((s) =>
        s.waitUntilReady({ timeoutMs }).then(
          () => null,
          (e: Error) => e,
        ),
      ),
    );
    const failed = late.find((e) => e !== null);
    if (failed) this.logger.warn(`@OnQueueEvent: ${failed.message} Events committed before it connects are not heard.`);
    if (!this.runtime.options.workers) return;
    try {
      // Only where workers run: a producer-only app may share the processor classes.
      for (const [name, f] of found) {
        checkBatchConcurrency(name, f.concurrency ?? this.runtime.queueOptions(name)!.concurrency, f.batches);
      }
      // Code-declared schedules become each database's job_schedulers rows (source 'code'); every
      // worker node's ticker runs them with the runtime ones (producer/code-schedulers.ts).
      const schedules = this.codeSchedules(found);
      warnUnhandled(this.runtime, found, schedules, this.logger);
      for (const c of this.runtime.connections) {
        const report = await reconcileCodeSchedulers(
          c.store.schedulers,
          schedules.filter((s) => this.runtime.connectionOf(s.queue) === c),
          [...found.keys()].filter((q) => this.runtime.connectionOf(q) === c),
          (queue) => this.runtime.queueOptions(queue)!.defaultJobOptions,
          this.runtime.options.maxPayloadBytes,
        );
        for (const r of report.removed) {
          this.logger.log(`Job scheduler ${quote(r.id)} of queue "${r.queue}" is no longer declared in code: removed`);
        }
      }
    } catch (err) {
      await this.runtime.close();
      throw err;
    }
    for (const [name, f] of found) {
      const registered = this.runtime.queueOptions(name)!;
      // @Processor({ concurrency }) overrides that one setting; the queue's limits and dead-letter queue stay.
      const queue =
        f.concurrency === undefined
          ? registered
          : {
              ...registered,
              concurrency: resolveQueueOptions({ name, concurrency: f.concurrency }, registered.defaultJobOptions).concurrency,
            };
      this.runtime
        .connectionOf(name)
        .supervisor.addQueue({ queue, handlers: f.handlers, catchAll: f.catchAll, batches: f.batches });
    }
    // Every connection's supervisor starts, with queues or not: it takes its part in that
    // database's maintenance (rescue of expired leases, retention), elected per database.
    await Promise.all(this.runtime.connections.map((c) => c.supervisor.start()));
    if (found.size) {
      const many = this.runtime.connections.length > 1;
      const names = [...found.keys()].map((n) => (many ? `${n} (${this.runtime.connectionOf(n).name})` : n));
      this.logger.log(`Workers started for queue(s): ${names.join(', ')} (${this.runtime.supervisor.workerId})`);
    }
  }

  /**
   * Subscribes each `@OnWorkerEvent` method to the events of the supervisors it listens to, and
   * each `@OnQueueEvent` method to the cross-process events of its queue (every registered
   * queue when it names none). Those subscriptions end when the module closes.
   */
  private subscribe(listeners: readonly FoundListener[]): QueueEvents[] {
    const subscriptions: QueueEvents[] = [];
    for (const l of listeners) {
      if (l.kind === 'queue') {
        const queues = l.queue !== undefined ? [l.queue] : this.runtime.registeredQueues.map((q) => q.name);
        for (const name of queues) {
          const events = this.runtime.queue(name).events();
          subscriptions.push(events);
          events.on(l.event as QueueEventName, (...args: unknown[]) => this.callListener('@OnQueueEvent', l, args));
        }
        continue;
      }
      const listener = (...args: unknown[]) => {
        const queue = (args[0] as { queue?: string }).queue;
        if (l.queue !== undefined && l.queue !== queue) return;
        this.callListener('@OnWorkerEvent', l, args);
      };
      // Each database's supervisor reports the events of its own queues.
      const on =
        l.queue !== undefined && this.runtime.queueOptions(l.queue)
          ? [this.runtime.connectionOf(l.queue)]
          : this.runtime.connections;
      for (const c of on) c.supervisor.on(l.event as WorkerEventName, listener);
    }
    return subscriptions;
  }

  /** Calls a listener method; what it throws (or rejects with) is logged, never passed on. */
  private callListener(decorator: string, l: FoundListener, args: unknown[]): void {
    try {
      const out = l.call(...args);
      if (out instanceof Promise) out.catch((err: Error) => this.listenerFailed(decorator, l.where, err));
    } catch (err) {
      this.listenerFailed(decorator, l.where, err as Error);
    }
  }

  private listenerFailed(decorator: string, where: string, err: Error): void {
    this.logger.error(`${decorator} listener ${where} threw: ${err?.message ?? String(err)}`, err?.stack);
  }

  /** Every schedule this app declares: `registerQueue({ repeat })` and `@Process({ cron })`, each once. */
  private codeSchedules(found: Map<string, FoundProcessor>): ResolvedSchedule[] {
    const schedules = [
      ...this.runtime.registeredQueues.flatMap((q) => q.repeat),
      ...[...found.values()].flatMap((f) => f.schedules),
    ];
    const seen = new Set<string>();
    for (const schedule of schedules) {
      if (seen.has(schedule.key)) {
        throw new PgQueueConfigError(
          `Job ${quote(schedule.name)} of queue "${schedule.queue}" is scheduled twice (registerQueue repeat and/or @Process cron); keep one.`,
        );
      }
      seen.add(schedule.key);
    }
    return schedules;
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.runtime.connections.map((c) => c.supervisor.stop()));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.runtime.close();
  }
}
