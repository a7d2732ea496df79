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
  return {
    queue,
    name: r.name,
    cron: r.cron,
    tz,
    payload: r.payload ?? {},
    key: `${queue}/${r.name}`,
    next: cronTicks(r.cron, tz, where, r.tz !== undefined),
  };
}

/**
 * The tick function of a cron expression in a time zone: the first tick strictly after `from`,
 * right across daylight-saving changes. Throws PgQueueConfigError, saying what to write, for a
 * bad expression or an unknown zone (`where` names the call).
 */
export function cronTicks(cron: string, tz: string, where: string, tzGiven = true): (from: Date) => Date | null {
  let pattern: Cron;
  try {
    pattern = new Cron(cron, { timezone: tz, paused: true });
    pattern.nextRun(); // an unknown time zone only shows when a date is computed
  } catch (err) {
    throw new PgQueueConfigError(
      `${where}: cron ${quote(cron)}${tzGiven ? ` in time zone ${quote(tz)}` : ''} is not valid (${(err as Error).message}). ` +
        `Use five fields (minute hour day-of-month month day-of-week) such as '0 3 * * *', or six with seconds first, ` +
        `and an IANA time zone such as 'Europe/Berlin'.`,
      { cause: err },
    );
  }
  return tz === 'UTC' ? (from) => pattern.nextRun(from) : ticksAcrossClockChanges(pattern, tz);
}

/** Longer than any clock change (at most 2 hours) and the hour croner misreads around it. */
const NEAR_CHANGE_MS = 3 * 3_600_000;

/**
 * The next tick, right across daylight-saving changes. croner reads `from` as a wall-clock time,
 * which is ambiguous or skipped over within an hour of a clock change: measured with croner 9.1,
 * from inside that hour it skips a tick (Europe/Berlin 02:30 daily, from 02:45 CEST on the
 * fall-back day, answers the next day: the 02:30 CET still to come never runs) or answers a tick
 * before `from` (America/New_York, an armed timer would fire at once, again and again). Its
 * answers from a tick, stepping forward from a point outside that hour, are consistent: a wall
 * time skipped by the spring change runs once, shifted by the change (02:30 -> 03:30), a wall
 * time that occurs twice on the fall-back day runs once. So near a change, every answer is taken
 * from that sequence, stepped from a point hours before `from`; the cursor keeps the steps
 * amortised when calls move forward (a seconds-level cron ticks thousands of times an hour).
 * Every node computes the same sequence, so the database's tick dedupe sees the same instants.
 */
function ticksAcrossClockChanges(pattern: Cron, tz: string): (from: Date) => Date | null {
  const offset = utcOffset(tz);
  let cursor: Date | null = null;
  return (from) => {
    const f = from.getTime();
    if (offset(f - NEAR_CHANGE_MS) === offset(f + NEAR_CHANGE_MS)) {
      cursor = null;
      return pattern.nextRun(from);
    }
    if (!cursor || cursor.getTime() > f || f - cursor.getTime() > 2 * NEAR_CHANGE_MS) cursor = new Date(f - NEAR_CHANGE_MS);
    let t = pattern.nextRun(cursor);
    while (t && t.getTime() <= f) {
      // A step that does not move forward would loop for ever: fall back to the plain answer.
      if (t.getTime() <= cursor.getTime()) return pattern.nextRun(from);
      cursor = t;
      t = pattern.nextRun(t);
    }
    return t;
  };
}

/** The UTC offset of `tz` at an instant, in milliseconds. */
function utcOffset(tz: string): (at: number) => number {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  return (at) => {
    const p: Record<string, number> = {};
    for (const part of format.formatToParts(new Date(at))) if (part.type !== 'literal') p[part.type] = Number(part.value);
    const wall = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
    return wall - Math.floor(at / 1000) * 1000;
  };
}
