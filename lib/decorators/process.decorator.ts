import { SetMetadata } from '@nestjs/common';
import { PROCESS_METADATA } from '../core/tokens';
import { validateJobName } from '../core/names';
import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';

/** What `@Process` stores: the job name (null for the queue's catch-all), and its schedule. */
export interface ProcessMetadata {
  readonly name: string | null;
  readonly cron?: string;
  readonly tz?: string;
}

/** `@Process({ name, cron, tz })`: a handler that also schedules its job. */
export interface ProcessOptions {
  /** The job name this method handles (and, with `cron`, enqueues). */
  readonly name: string;
  /** Enqueue this job once per tick, e.g. `'0 3 * * *'` (see `RepeatOptions`). @default undefined (not scheduled) */
  readonly cron?: string;
  /** IANA time zone of `cron`. @default UTC */
  readonly tz?: string;
}

/**
 * Marks a method of a `@Processor` class as the handler of one job name. Without a name it
 * handles every job of the queue that has no handler of its own. What the method returns is
 * stored as the job's result; what it throws fails the attempt. With `cron`, the job is also
 * enqueued on that schedule, once per tick across all nodes.
 * @example @Process({ name: 'nightly-report', cron: '0 3 * * *', tz: 'Europe/Berlin' })
 */
export function Process(nameOrOptions?: string | ProcessOptions): MethodDecorator {
  const o = typeof nameOrOptions === 'object' && nameOrOptions !== null ? nameOrOptions : { name: nameOrOptions };
  for (const k in o) {
    if (k !== 'name' && k !== 'cron' && k !== 'tz') {
      throw new PgQueueConfigError(
        `@Process(): unknown option ${quote(k)}` +
          `${k === 'concurrency' ? ' (concurrency is per queue: registerQueue({ concurrency }) or @Processor({ name, concurrency }))' : ''}` +
          `${k === 'timezone' || k === 'timeZone' ? " (use tz, an IANA name such as 'Europe/Berlin')" : ''}` +
          `${k === 'pattern' ? ' (use cron)' : ''}. ` +
          'Use @Process(name) or @Process({ name, cron?, tz? }).',
      );
    }
  }
  if (o.name !== undefined) validateJobName(o.name);
  const meta: ProcessMetadata = {
    name: o.name ?? null,
    ...('cron' in o && o.cron !== undefined ? { cron: o.cron, tz: o.tz } : {}),
  };
  return SetMetadata(PROCESS_METADATA, meta);
}
