import { Injectable } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import type { JobHandler } from '../core/job';
import type { BatchHandlerEntry, BatchJobHandler } from '../core/batch';
import { resolveSchedule, type ResolvedSchedule } from '../core/cron-schedule';
import {
  INJECT_QUEUE_METADATA,
  ON_QUEUE_EVENT_METADATA,
  ON_WORKER_EVENT_METADATA,
  PROCESS_METADATA,
  PROCESSOR_METADATA,
} from '../core/tokens';
import type { InjectQueueMetadata } from '../decorators/inject-queue.decorator';
import type { OnQueueEventMetadata } from '../decorators/on-queue-event.decorator';
import type { OnWorkerEventMetadata } from '../decorators/on-worker-event.decorator';
import type { ProcessorOptions } from '../decorators/processor.decorator';
import type { ProcessMetadata } from '../decorators/process.decorator';

/** The `@Processor` classes of one queue, as found: their handlers, schedules and concurrency. */
export interface FoundProcessor {
  readonly handlers: Map<string, JobHandler>;
  /** `@Process({ name, batch })` handlers, by job name (never also in `handlers`). */
  readonly batches: Map<string, BatchHandlerEntry>;
  readonly schedules: ResolvedSchedule[];
  catchAll?: JobHandler;
  concurrency?: number;
  /** The classes, by name, for messages. */
  readonly owners: string[];
}

/** One `@InjectQueue(name)` of a provider or controller, and whether Nest injected it. */
export interface FoundInjection {
  readonly name: string;
  /** `@InjectQueue('name') in Class`, for messages. */
  readonly where: string;
  /** The module that declares the class, for messages. */
  readonly host: string;
  /** Whether Nest resolved the injection; null for a request-scoped class (resolved per request). */
  readonly injected: boolean | null;
}

/** One `@OnQueueEvent` (kind 'queue': cross-process) or `@OnWorkerEvent` (kind 'worker': in-process) method, bound to its instance. */
export interface FoundListener {
  readonly kind: 'queue' | 'worker';
  readonly event: OnQueueEventMetadata['event'] | OnWorkerEventMetadata['event'];
  /** Only events of this queue; all queues when omitted. */
  readonly queue?: string;
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly call: (...args: unknown[]) => unknown;
}

/**
 * Finds what the decorators wrote (`@Processor`, `@Process`, `@OnQueueEvent`, `@InjectQueue`)
 * once every provider exists, and hands it over; throws on a misuse the metadata alone shows.
 * It starts nothing: `PgQueueLifecycle` (lib/module) checks what it found against the
 * registered queues and starts the workers.
 */
@Injectable()
export class PgQueueExplorer {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  /**
   * Every `@InjectQueue` of every provider and controller. Nest injected undefined where it
   * could not (the injection is optional, so that the boot's own message replaces Nest's
   * "can't resolve dependencies").
   */
  findInjectedQueues(): FoundInjection[] {
    const found: FoundInjection[] = [];
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const { metatype } = wrapper;
      if (!metatype || typeof metatype !== 'function') continue;
      const injected = Reflect.getMetadata(INJECT_QUEUE_METADATA, metatype) as InjectQueueMetadata[] | undefined;
      for (const inj of injected ?? []) {
        found.push({
          name: inj.name,
          where: `@InjectQueue('${inj.name}') in ${metatype.name}`,
          host: wrapper.host?.metatype?.name ?? `${metatype.name}'s module`,
          // Request-scoped classes are built per request: their dependencies are resolved later.
          injected: wrapper.isDependencyTreeStatic() ? isInjected(wrapper, inj) : null,
        });
      }
    }
    return found;
  }

  /**
   * Every processor's handlers, by queue; throws on duplicates, on a request-scoped processor and
   * on a queue `isRegistered` does not know.
   */
  findProcessors(isRegistered: (queue: string) => boolean): Map<string, FoundProcessor> {
    const found = new Map<string, FoundProcessor>();
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
      if (!isRegistered(meta.name)) {
        throw new PgQueueConfigError(
          `@Processor('${meta.name}') on ${owner}: queue "${meta.name}" is not registered. ` +
            `Add PgQueueModule.registerQueue({ name: '${meta.name}' }) to the imports of a module.`,
        );
      }
      const entry: FoundProcessor = found.get(meta.name) ?? {
        handlers: new Map(),
        batches: new Map(),
        schedules: [],
        owners: [],
      };
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
      this.addHandlers(entry, meta.name, owner, instance as object);
      if (entry.handlers.size === 0 && entry.batches.size === 0 && !entry.catchAll) {
        throw new PgQueueConfigError(`@Processor('${meta.name}') class ${owner} has no @Process methods.`);
      }
    }
    return found;
  }

  /** The `@Process` methods of one processor instance, into its queue's entry. */
  private addHandlers(entry: FoundProcessor, queue: string, owner: string, instance: object): void {
    const proto = Object.getPrototypeOf(instance) as object;
    for (const method of this.scanner.getAllMethodNames(proto)) {
      const fn = (proto as Record<string, unknown>)[method];
      const pm =
        typeof fn === 'function' ? (Reflect.getMetadata(PROCESS_METADATA, fn) as ProcessMetadata | undefined) : undefined;
      if (!pm) continue;
      const call = (arg: unknown) => (fn as (...a: unknown[]) => unknown).call(instance, arg);
      const handler: JobHandler = call;
      const where = `${owner}.${method}`;
      if (pm.cron !== undefined) {
        if (pm.name === null)
          throw new PgQueueConfigError(`@Process({ cron }) on ${where} needs a name: the job each tick enqueues.`);
        entry.schedules.push(resolveSchedule(queue, { name: pm.name, cron: pm.cron, tz: pm.tz }, `@Process on ${where}`));
      }
      if (pm.name === null) {
        if (entry.catchAll)
          throw new PgQueueConfigError(`Queue "${queue}" has two catch-all @Process() handlers; ${where} is the second.`);
        entry.catchAll = handler;
      } else {
        if (entry.handlers.has(pm.name) || entry.batches.has(pm.name)) {
          throw new PgQueueConfigError(
            `Job ${quote(pm.name)} of queue "${queue}" has two @Process handlers; ${where} is the second. Keep one.`,
          );
        }
        if (pm.batch) entry.batches.set(pm.name, { handler: call as BatchJobHandler, batch: pm.batch, where });
        else entry.handlers.set(pm.name, handler);
      }
    }
  }

  /** Every `@OnQueueEvent` and `@OnWorkerEvent` method of every (not request-scoped) provider. */
  findEventListeners(): FoundListener[] {
    const found: FoundListener[] = [];
    for (const wrapper of this.discovery.getProviders()) {
      const { instance } = wrapper;
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue;
      const proto = Object.getPrototypeOf(instance) as object | null;
      if (!proto) continue;
      for (const method of this.scanner.getAllMethodNames(proto)) {
        const fn = (proto as Record<string, unknown>)[method];
        if (typeof fn !== 'function') continue;
        for (const kind of ['queue', 'worker'] as const) {
          const key = kind === 'queue' ? ON_QUEUE_EVENT_METADATA : ON_WORKER_EVENT_METADATA;
          const meta = Reflect.getMetadata(key, fn) as OnQueueEventMetadata | OnWorkerEventMetadata | undefined;
          if (!meta) continue;
          found.push({
            kind,
            event: meta.event,
            queue: meta.queue,
            where: `${instance.constructor.name}.${method}`,
            call: (...args) => (fn as (...a: unknown[]) => unknown).apply(instance, args),
          });
        }
      }
    }
    return found;
  }
}

/** What DiscoveryService lists: a provider or controller with its metadata. */
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/** Whether Nest resolved `inj` (a constructor parameter or a property) of a static class. */
function isInjected(wrapper: InstanceWrapper, inj: InjectQueueMetadata): boolean {
  return inj.index !== undefined
    ? wrapper.getCtorMetadata()?.[inj.index] !== undefined
    : (wrapper.getPropertiesMetadata()?.some((p) => p.key === inj.property && p.wrapper !== undefined) ?? false);
}
