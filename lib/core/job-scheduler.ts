import { cronTicks } from './cron-schedule';
import { PgQueueConfigError } from './errors';
import { nameProblem, quote } from './input-text';
import type { JobDefaults, JobOptions } from './job';

/**
 * When a job scheduler ticks (BullMQ 6's `RepeatOptions` of `upsertJobScheduler`): either a cron
 * `pattern` or an interval `every`, never both.
 */
export interface JobSchedulerRepeat {
  /** A cron expression: five fields (minute hour day month weekday) or six (seconds first), e.g. `'0 3 * * *'`. */
  readonly pattern?: string;
  /** An interval in milliseconds (BullMQ's name; at least 1000): ticks at the start, then every `every` ms. */
  readonly every?: number;
  /** IANA time zone `pattern` is read in, e.g. `'Europe/Berlin'` (daylight-saving changes handled). @default 'UTC' */
  readonly tz?: string;
  /** No tick before this instant. @default undefined (from now) */
  readonly startDate?: Date | string | number;
  /** No tick after this instant; the scheduler is removed once its next tick would be later. @default undefined (no end) */
  readonly endDate?: Date | string | number;
  /** At most this many jobs in all; the scheduler is removed once it made them. @default undefined (no limit) */
  readonly limit?: number;
  /** With `pattern`: the first job at once, then on the pattern (`every` always starts at once). @default false */
  readonly immediately?: boolean;
}

/**
 * The options of a scheduler's jobs: the per-job defaults (priority, attempts, backoff,
 * timeoutMs) and the job's `group` (docs/groups.md). Internal name: the public types spell it out.
 */
export type JobSchedulerJobOptions = JobDefaults & Pick<JobOptions, 'group'>;

/** The job each tick of a scheduler enqueues (BullMQ's job template). */
export interface JobSchedulerTemplate<T = unknown> {
  /** The job name; a `@Process` handler of the queue must handle it. */
  readonly name: string;
  /** The payload of every tick's job. @default {} */
  readonly payload?: T;
  /** BullMQ's name for `payload`; give one of the two. */
  readonly data?: T;
  /**
   * Options of every tick's job: priority, attempts, backoff, timeoutMs (resolved with the
   * queue's defaults at the upsert), and `group` (checked as add's; every tick's job gets it).
   */
  readonly opts?: JobDefaults & Pick<JobOptions, 'group'>;
}

/** A stored job scheduler, as `getJobScheduler` returns it (BullMQ's `JobSchedulerJson`). */
export interface JobScheduler<T = unknown> {
  /** The id it was upserted with (a code-declared one: its job name). */
  readonly id: string;
  /** The queue it enqueues into. */
  readonly queue: string;
  /** The name of the jobs it enqueues. */
  readonly name: string;
  /** Its cron expression, or null for an interval. */
  readonly pattern: string | null;
  /** Its interval in milliseconds, or null for a pattern. */
  readonly every: number | null;
  /** The time zone `pattern` is read in. */
  readonly tz: string;
  /** No tick before this instant (null: none given). */
  readonly startDate: Date | null;
  /** No tick after this instant (null: no end). */
  readonly endDate: Date | null;
  /** At most this many jobs in all (null: no limit). */
  readonly limit: number | null;
  /** Jobs it has enqueued so far (BullMQ's `iterationCount`). */
  readonly iterationCount: number;
  /** Its next tick (kept while paused; a resume skips those that passed). */
  readonly next: Date | null;
  /** True while paused (`pauseJobScheduler`): no tick until `resumeJobScheduler`. */
  readonly paused: boolean;
  /** `'code'`: declared by `@Process({ cron })` or `registerQueue({ repeat })`, reconciled at boot. */
  readonly source: 'code' | 'runtime';
  /** The job each tick enqueues: its payload and the options given at the upsert. */
  readonly template: { readonly payload: T; readonly opts: JobDefaults & Pick<JobOptions, 'group'> };
  /** When it was first stored. */
  readonly createdAt: Date;
  /** When it was last upserted, paused, resumed or ticked. */
  readonly updatedAt: Date;
}

/** A scheduler's timing, validated: what the tick and the upsert compute next ticks from. */
export interface SchedulerTiming {
  readonly pattern: string | null;
  readonly everyMs: number | null;
  readonly tz: string;
  readonly startAt: Date | null;
  readonly endAt: Date | null;
  readonly limit: number | null;
  readonly immediately: boolean;
}

/** The shortest `every`: a shorter interval is a busy loop of inserts (use a worker that loops). */
export const MIN_EVERY_MS = 1000;
/** At most this many missed ticks are enqueued per scheduler and pass (the rest on the next pass). */
export const MAX_CATCH_UP = 100;
/**
 * A tick this late or less always runs, whatever `cronCatchUpMs` (even 0): a node's timer or a
 * busy database may be that late; only ticks missed for longer are downtime.
 */
export const TICK_GRACE_MS = 60_000;

const REPEAT_KEYS = ['pattern', 'every', 'tz', 'startDate', 'endDate', 'limit', 'immediately'];
const REPEAT_HINTS: Record<string, string> = {
  cron: 'pattern',
  everyMs: 'every',
  startAt: 'startDate',
  endAt: 'endDate',
  key: 'the first argument (the scheduler id)',
  offset: 'startDate',
  count: 'limit',
};
const TEMPLATE_KEYS = ['name', 'payload', 'data', 'opts'];
const OPTS_KEYS = ['priority', 'attempts', 'backoff', 'timeoutMs', 'group'];

/** A scheduler id: 1 to 200 characters, any text (a tenant's id welcome: `report:tenant-42`). */
export function validateSchedulerId(where: string, id: unknown): string {
  const problem = nameProblem(id, 200);
  if (problem) throw new PgQueueConfigError(`${where}: the scheduler id ${problem}; use a string such as 'report:tenant-42'.`);
  return id as string;
}

function date(where: string, key: string, v: unknown): Date | null {
  if (v === undefined || v === null) return null;
  const d = v instanceof Date ? new Date(v.getTime()) : typeof v === 'string' || typeof v === 'number' ? new Date(v) : null;
  if (!d || Number.isNaN(d.getTime())) {
    throw new PgQueueConfigError(`${where}: ${key} must be a Date, an ISO 8601 string or epoch milliseconds, got ${quote(v)}.`);
  }
  return d;
}

function refuseUnknown(where: string, what: string, o: object, known: readonly string[], hints: Record<string, string> = {}) {
  for (const k of Object.keys(o)) {
    if (known.includes(k)) continue;
    const hint = hints[k] ? ` (use ${hints[k]})` : '';
    throw new PgQueueConfigError(`${where}: unknown ${what} option ${quote(k)}${hint}; allowed: ${known.join(', ')}.`);
  }
}

/** Checks a scheduler's repeat options; throws PgQueueConfigError saying what to change. */
export function resolveSchedulerTiming(where: string, r: JobSchedulerRepeat): SchedulerTiming {
  if (typeof r !== 'object' || r === null) {
    throw new PgQueueConfigError(
      `${where}: repeat options must be an object such as { pattern: '0 3 * * *' } or { every: 60_000 }.`,
    );
  }
  refuseUnknown(where, 'repeat', r, REPEAT_KEYS, REPEAT_HINTS);
  const { pattern, every } = r;
  if ((pattern === undefined) === (every === undefined)) {
    throw new PgQueueConfigError(
      `${where}: give exactly one of pattern (a cron expression such as '0 3 * * *') and every (milliseconds, at least ${MIN_EVERY_MS}).`,
    );
  }
  if (pattern !== undefined && typeof pattern !== 'string') {
    throw new PgQueueConfigError(
      `${where}: pattern must be a cron expression string such as '0 3 * * *', got ${quote(pattern)}.`,
    );
  }
  if (every !== undefined && (!Number.isSafeInteger(every) || every < MIN_EVERY_MS)) {
    throw new PgQueueConfigError(
      `${where}: every must be a whole number of milliseconds, at least ${MIN_EVERY_MS}, got ${quote(every)}.`,
    );
  }
  if (r.tz !== undefined && (typeof r.tz !== 'string' || r.tz === '')) {
    throw new PgQueueConfigError(`${where}: tz must be an IANA time zone name such as 'Europe/Berlin', got ${quote(r.tz)}.`);
  }
  if (r.tz !== undefined && every !== undefined) {
    throw new PgQueueConfigError(
      `${where}: tz applies to pattern only; an interval (every) is the same in every zone. Leave tz out.`,
    );
  }
  const tz = r.tz ?? 'UTC';
  if (pattern !== undefined) cronTicks(pattern, tz, where, r.tz !== undefined); // throws on a bad one
  const startAt = date(where, 'startDate', r.startDate);
  const endAt = date(where, 'endDate', r.endDate);
  if (startAt && endAt && endAt < startAt) {
    throw new PgQueueConfigError(`${where}: endDate (${endAt.toISOString()}) is before startDate (${startAt.toISOString()}).`);
  }
  if (r.limit !== undefined && (!Number.isSafeInteger(r.limit) || r.limit < 1 || r.limit > 2 ** 31 - 1)) {
    throw new PgQueueConfigError(`${where}: limit must be a whole number of jobs, at least 1, got ${quote(r.limit)}.`);
  }
  if (r.immediately !== undefined && typeof r.immediately !== 'boolean') {
    throw new PgQueueConfigError(`${where}: immediately must be true or false, got ${quote(r.immediately)}.`);
  }
  return {
    pattern: pattern ?? null,
    everyMs: every ?? null,
    tz,
    startAt,
    endAt,
    limit: r.limit ?? null,
    immediately: r.immediately ?? false,
  };
}

/** Checks a job template's shape (name, payload or data, and the per-scheduler job options: four defaults and group). */
export function checkSchedulerTemplate(
  where: string,
  t: JobSchedulerTemplate,
): { name: string; payload: unknown; opts: JobSchedulerJobOptions } {
  if (typeof t !== 'object' || t === null || typeof t.name !== 'string') {
    throw new PgQueueConfigError(`${where}: the job template needs a name: { name: 'report', payload: { ... } }.`);
  }
  refuseUnknown(where, 'job template', t, TEMPLATE_KEYS);
  if (t.payload !== undefined && t.data !== undefined) {
    throw new PgQueueConfigError(`${where}: give payload or data (BullMQ's name for it), not both.`);
  }
  const opts = t.opts ?? {};
  if (typeof opts !== 'object' || opts === null) throw new PgQueueConfigError(`${where}: opts must be an object.`);
  refuseUnknown(where, 'scheduled job', opts, OPTS_KEYS, {
    delayMs: 'startDate of the repeat options',
    runAt: 'startDate of the repeat options',
    uniqueKey: 'the scheduler id: one job per tick already',
    deduplication: 'the scheduler id: one job per tick already',
    jobId: 'the scheduler id',
  });
  return { name: t.name, payload: t.payload ?? t.data ?? {}, opts };
}

/** The next tick strictly after `from`, by pattern (in its zone) or interval, or null when none. */
export type NextTick = (from: Date) => Date | null;

/** A scheduler's step from one tick to the next. `where` names the caller in a bad pattern's error. */
export function stepOf(t: Pick<SchedulerTiming, 'pattern' | 'everyMs' | 'tz'>, where: string): NextTick {
  if (t.pattern !== null) return cronTicks(t.pattern, t.tz, where);
  const every = t.everyMs!;
  return (from) => new Date(from.getTime() + every);
}

/**
 * A new scheduler's first tick (null: "now", by the database's clock). `every` and `immediately`
 * start at startDate or at once; a pattern at its first tick at or after startDate (or now).
 */
export function firstTick(t: SchedulerTiming, step: NextTick, now: Date): Date | null {
  const from = t.startAt && t.startAt > now ? t.startAt : null;
  if (t.everyMs !== null || t.immediately) return from;
  return step(new Date((from ?? now).getTime() - (from ? 1 : 0)));
}

/** What one pass does with a due scheduler: the ticks to enqueue, oldest first, and its next tick (null: it ended). */
export interface TickPlan {
  readonly runs: Date[];
  readonly next: Date | null;
}

/**
 * The ticks a due scheduler enqueues now. Ticks from `due` up to `now` run, each once, except
 * those older than `catchUpMs` (downtime: `cronCatchUpMs`), and at most MAX_CATCH_UP per pass;
 * the latest tick up to TICK_GRACE_MS late always runs. endDate and limit end the scheduler.
 */
export function planTicks(
  s: {
    readonly due: Date;
    readonly everyMs: number | null;
    readonly endAt: Date | null;
    readonly limit: number | null;
    readonly count: number;
  },
  step: NextTick,
  now: Date,
  catchUpMs: number,
): TickPlan {
  const cutoff = now.getTime() - Math.max(catchUpMs, TICK_GRACE_MS);
  let t: Date | null = s.due;
  if (t.getTime() < cutoff) {
    // Skip the ticks missed beyond the window, by arithmetic for an interval.
    t =
      s.everyMs !== null
        ? new Date(t.getTime() + Math.ceil((cutoff - t.getTime()) / s.everyMs) * s.everyMs)
        : step(new Date(cutoff - 1));
  }
  const runs: Date[] = [];
  const left = () => s.limit === null || s.count + runs.length < s.limit;
  while (t && t <= now && runs.length < MAX_CATCH_UP && (s.endAt === null || t <= s.endAt) && left()) {
    runs.push(t);
    t = step(t);
  }
  if (!t || (s.endAt !== null && t > s.endAt) || !left()) return { runs, next: null };
  return { runs, next: t };
}
