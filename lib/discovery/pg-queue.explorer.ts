import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import type { JobHandler } from '../core/job';
import { INJECT_QUEUE_METADATA, ON_QUEUE_EVENT_METADATA, PROCESS_METADATA, PROCESSOR_METADATA } from '../core/tokens';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { InjectQueueMetadata } from '../decorators/inject-queue.decorator';
import type { OnQueueEventMetadata } from '../decorators/on-queue-event.decorator';
import type { ProcessorOptions } from '../decorators/processor.decorator';
import type { ProcessMetadata } from '../decorators/process.decorator';
import { resolveQueueOptions } from '../core/options/module-checks';
import { notRegisteredMessage, type PgQueueRuntime } from '../module/pg-queue.runtime';
import { resolveSchedule, type ResolvedSchedule } from '../core/cron-schedule';
import { buildJobRow } from '../producer/enqueue';
import type { CronEntry } from '../worker/cron';

interface Found {
  handlers: Map<string, JobHandler>;
  schedules: ResolvedSchedule[];
  catchAll?: JobHandler;
  concurrency?: number;
  owners: string[];
}

/**
 * Finds `@Processor` classes once, at bootstrap, fails the boot on any misuse, and starts the
 * workers; stops them first thing at shutdown, before other providers tear down what jobs use.
 */
@Injectable()
export class PgQueueExplorer implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger('PgQueue');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    @Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime,
  ) {}

  /**
   * Every `@InjectQueue` must have got its queue. Nest injected undefined where it did not (the
   * injection is optional, so that this message replaces Nest's "can't resolve dependencies"):
   * the queue is not registered at all, or registered in a module the class's module does not import.
   */
  checkInjectedQueues(): void {
    const registered = this.runtime.registeredQueues.map((q) => q.name);
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const { metatype } = wrapper;
      if (!metatype || typeof metatype !== 'function') continue;
      const injected = Reflect.getMetadata(INJECT_QUEUE_METADATA, metatype) as InjectQueueMetadata[] | undefined;
      if (!injected) continue;
      for (const inj of injected) {
        const where = `@InjectQueue('${inj.name}') in ${metatype.name}`;
        if (!this.runtime.queueOptions(inj.name)) throw new PgQueueConfigError(notRegisteredMessage(inj.name, registered, where));
        // Request-scoped classes are built per request: their dependencies are resolved later.
        if (!wrapper.isDependencyTreeStatic()) continue;
        const resolved =
          inj.index !== undefined
            ? wrapper.getCtorMetadata()?.[inj.index] !== undefined
            : wrapper.getPropertiesMetadata()?.some((p) => p.key === inj.property && p.wrapper !== undefined);
        if (!resolved) {
          const host = wrapper.host?.metatype?.name ?? `${metatype.name}'s module`;
          throw new PgQueueConfigError(
            `${where}: queue "${inj.name}" is registered, but not in a module that ${host} imports, so Nest cannot inject it ` +
              `there. Add PgQueueModule.registerQueue({ name: '${inj.name}' }) to the imports of ${host} (with the same ` +
              `options), or export that registerQueue(...) from a module ${host} imports.`,
          );
        }
      }
    }
  }

  /** Checks, once every provider exists, what can be checked before anything runs. */
  onModuleInit(): Promise<void> {
    try {
      this.runtime.checkDeadLetterQueues();
      this.checkInjectedQueues();
      return Promise.resolve();
    } catch (err) {
      // A failed boot must not leave the pool's connections open behind it.
      return this.runtime.close().then(() => Promise.reject(err as Error));
    }
  }

  /** Every processor's handlers, by queue; throws on duplicates and unregistered queues. */
  explore(): Map<string, Found> {
    const found = new Map<string, Found>();
    for (const wrapper of this.discovery.getProviders()) {
      const { instance, metatype } = wrapper;
      if (!metatype || typeof metatype !== 'function') continue;
      const meta = Reflect.getMetadata(PROCESSOR_METADATA, metatype) as ProcessorOptions | undefined;
      if (!meta) continue;
      const owner = metatype.name;
      if (!wrapper.isDependencyTreeStatic()) {
        throw new PgQueueConfigError(
          `@Processor class ${owner} must not be request-scoped (nor depend on one): workers outlive requests.`,
        );
      }
      if (!this.runtime.queueOptions(meta.name)) {
        throw new PgQueueConfigError(
          `@Processor('${meta.name}') on ${owner}: queue "${meta.name}" is not registered. ` +
            `Add PgQueueModule.registerQueue({ name: '${meta.name}' }) to the imports of a module.`,
        );
      }
      const entry: Found = found.get(meta.name) ?? { handlers: new Map(), schedules: [], owners: [] };
      found.set(meta.name, entry);
      entry.owners.push(owner);
      if (meta.concurrency !== undefined) {
        if (entry.concurrency !== undefined && entry.concurrency !== meta.concurrency) {
          throw new PgQueueConfigError(
            `Processors of queue "${meta.name}" (${entry.owners.join(', ')}) set different concurrency values.`,
          );
        }
        entry.concurrency = meta.concurrency;
      }
      const proto = Object.getPrototypeOf(instance) as object;
      for (const method of this.scanner.getAllMethodNames(proto)) {
        const fn = (proto as Record<string, unknown>)[method];
        const pm =
          typeof fn === 'function' ? (Reflect.getMetadata(PROCESS_METADATA, fn) as ProcessMetadata | undefined) : undefined;
        if (!pm) continue;
        const handler: JobHandler = (job) => (fn as (...a: unknown[]) => unknown).call(instance, job);
        const where = `${owner}.${method}`;
        if (pm.cron !== undefined) {
          if (pm.name === null)
            throw new PgQueueConfigError(`@Process({ cron }) on ${where} needs a name: the job each tick enqueues.`);
          entry.schedules.push(resolveSchedule(meta.name, { name: pm.name, cron: pm.cron, tz: pm.tz }, `@Process on ${where}`));
        }
        if (pm.name === null) {
          if (entry.catchAll)
            throw new PgQueueConfigError(`Queue "${meta.name}" has two catch-all @Process() handlers; ${where} is the second.`);
          entry.catchAll = handler;
        } else {
          if (entry.handlers.has(pm.name)) {
            throw new PgQueueConfigError(
              `Job ${quote(pm.name)} of queue "${meta.name}" has two @Process handlers; ${where} is the second. Keep one.`,
            );
          }
          entry.handlers.set(pm.name, handler);
        }
      }
      if (entry.handlers.size === 0 && !entry.catchAll) {
        throw new PgQueueConfigError(`@Processor('${meta.name}') class ${owner} has no @Process methods.`);
      }
    }
    return found;
  }

  /** Subscribes every `@OnQueueEvent` method of every provider to the supervisor's events. */
  private subscribeListeners(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const { instance } = wrapper;
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue;
      const proto = Object.getPrototypeOf(instance) as object | null;
      if (!proto) continue;
      for (const method of this.scanner.getAllMethodNames(proto)) {
        const fn = (proto as Record<string, unknown>)[method];
        if (typeof fn !== 'function') continue;
        const meta = Reflect.getMetadata(ON_QUEUE_EVENT_METADATA, fn) as OnQueueEventMetadata | undefined;
        if (!meta) continue;
        const where = `${instance.constructor.name}.${method}`;
        const listener = (...args: unknown[]) => {
          const queue = (args[0] as { queue?: string }).queue;
          if (meta.queue !== undefined && meta.queue !== queue) return;
          try {
            const out = (fn as (...a: unknown[]) => unknown).apply(instance, args);
            if (out instanceof Promise) out.catch((err: Error) => this.listenerFailed(where, err));
          } catch (err) {
            this.listenerFailed(where, err as Error);
          }
        };
        // Each database's supervisor reports the events of its own queues.
        const on =
          meta.queue !== undefined && this.runtime.queueOptions(meta.queue)
            ? [this.runtime.connectionOf(meta.queue)]
            : this.runtime.connections;
        for (const c of on) c.supervisor.on(meta.event, listener);
      }
    }
  }

  private listenerFailed(where: string, err: Error): void {
    this.logger.error(`@OnQueueEvent listener ${where} threw: ${err?.message ?? String(err)}`, err?.stack);
  }

  async onApplicationBootstrap(): Promise<void> {
    let found: Map<string, Found>;
    try {
      // Look up the optional CLS transaction host now, when every provider exists, rather than on
      // the first add(): loading that package cost the first enqueue tens of milliseconds (bench/).
      this.runtime.ambientTransaction();
      found = this.explore();
      this.subscribeListeners();
    } catch (err) {
      // A failed boot must not leave the pool's connections open behind it.
      await this.runtime.close();
      throw err;
    }
    if (!this.runtime.options.workers) return;
    try {
      // Each database elects its own cron scheduler: a schedule runs where its queue lives.
      const entries = this.cronEntries(found);
      for (const c of this.runtime.connections) {
        c.supervisor.setCron(entries.filter((e) => this.runtime.connectionOf(e.schedule.queue) === c));
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
      this.runtime.connectionOf(name).supervisor.addQueue({ queue, handlers: f.handlers, catchAll: f.catchAll });
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

  /** Every schedule this node runs: `registerQueue({ repeat })` and `@Process({ cron })`, each once. */
  private cronEntries(found: Map<string, Found>): CronEntry[] {
    const schedules = [
      ...this.runtime.registeredQueues.flatMap((q) => q.repeat),
      ...[...found.values()].flatMap((f) => f.schedules),
    ];
    const seen = new Set<string>();
    return schedules.map((schedule) => {
      if (seen.has(schedule.key)) {
        throw new PgQueueConfigError(
          `Job ${quote(schedule.name)} of queue "${schedule.queue}" is scheduled twice (registerQueue repeat and/or @Process cron); keep one.`,
        );
      }
      seen.add(schedule.key);
      const queue = this.runtime.queueOptions(schedule.queue)!;
      const row = buildJobRow(
        schedule.queue,
        schedule.name,
        schedule.payload,
        undefined,
        queue.defaultJobOptions,
        this.runtime.options.maxPayloadBytes,
      );
      return { schedule, row };
    });
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.runtime.connections.map((c) => c.supervisor.stop()));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.runtime.close();
  }
}
