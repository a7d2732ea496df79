import { Cron } from 'croner';
import { PgQueueConfigError } from './errors';
import { quote } from './input-text';
import { validateJobName } from './names';

/** A recurring job: enqueued once per tick of `cron`, however many nodes run it. */
export interface RepeatOptions {
  /** The job name; a `@Process` handler of the queue must handle it. */
  readonly name: string;
  /** Five fields (minute hour day month weekday) or six (seconds first), e.g. `'0 3 * * *'`. */
  readonly cron: string;
  /** IANA time zone the expression is read in, e.g. `'Europe/Berlin'`. @default UTC */
  readonly tz?: string;
  /** The payload of every tick's job. @default {} */
  readonly payload?: unknown;
}

/** A validated schedule. */
export interface ResolvedSchedule {
  readonly queue: string;
  readonly name: string;
  readonly cron: string;
  readonly tz: string;
  readonly payload: unknown;
  /** Identifies the schedule in the database: one per queue and job name. */
  readonly key: string;
  /** The first tick strictly after `from`, or null if there is none. */
  next(from: Date): Date | null;
}

/** Parses and checks a schedule (the cron library reads the expression and the time zone). */
export function resolveSchedule(queue: string, r: RepeatOptions, where: string): ResolvedSchedule {
  if (typeof r !== 'object' || r === null || typeof r.name !== 'string' || typeof r.cron !== 'string') {
    throw new PgQueueConfigError(
      `${where}: a recurring job needs { name, cron }, for example { name: 'nightly-report', cron: '0 3 * * *' }.`,
    );
  }
  try {
    validateJobName(r.name);
  } catch (err) {
    throw new PgQueueConfigError(`${where}: ${(err as Error).message}`, { cause: err });
  }
  if (r.tz !== undefined && typeof r.tz !== 'string') {
    throw new PgQueueConfigError(`${where}: tz must be an IANA time zone name such as 'Europe/Berlin', got ${quote(r.tz)}.`);
  }
  const tz = r.tz ?? 'UTC';
  let pattern: Cron;
  try {
    pattern = new Cron(r.cron, { timezone: tz, paused: true });
    pattern.nextRun(); // an unknown time zone only shows when a date is computed
  } catch (err) {
    throw new PgQueueConfigError(
      `${where}: cron ${quote(r.cron)}${r.tz ? ` in time zone ${quote(r.tz)}` : ''} is not valid (${(err as Error).message}). ` +
        `Use five fields (minute hour day-of-month month day-of-week) such as '0 3 * * *', or six with seconds first, ` +
        `and an IANA time zone such as 'Europe/Berlin'.`,
      { cause: err },
    );
  }
  return {
    queue,
    name: r.name,
    cron: r.cron,
    tz,
    payload: r.payload ?? {},
    key: `${queue}/${r.name}`,
    next: (from) => pattern.nextRun(from),
  };
}
