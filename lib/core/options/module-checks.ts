import { PgQueueConfigError } from '../errors';
import { quote } from '../input-text';
import { validateConnectionName, validateQueueName, validateSchemaName } from '../names';
import { resolveSchedule, type RepeatOptions, type ResolvedSchedule } from '../cron-schedule';
import type { PgQueueModuleOptions, RegisterQueueOptions } from './types';
import type { ResolvedGroupOptions, ResolvedJobDefaults, ResolvedPgQueueOptions, ResolvedQueueOptions } from './resolved';
import { DEFAULTS } from './defaults';
import { bool, int, oneOf } from './field-checks';
import { MAX_DELAY_MS, resolveJobDefaults, resolveQueueJobDefaults } from './job-checks';
import { refuseUnknownKeys } from './unknown-keys';

/** The longest retention: 100 years (stored as a bigint of milliseconds). */
const MAX_RETENTION_MS = MAX_DELAY_MS;

const KNOWN_MODULE_KEYS = [
  'dataSource',
  'connection',
  'listenConnection',
  'schema',
  'migrate',
  'schemaOwner',
  'workers',
  'listen',
  'pollIntervalMs',
  'leaseMs',
  'heartbeatIntervalMs',
  'rescueIntervalMs',
  'vacuumAtDeadTuples',
  'cronCatchUpMs',
  'shutdownTimeoutMs',
  'connectTimeoutMs',
  'poolSize',
  'maxPayloadBytes',
  'progressIntervalMs',
  'maxProgressBytes',
  'jobLogs',
  'asyncCommit',
  'preparedStatements',
  'events',
  'handleUnhandledRejections',
  'logJobFailures',
  'retention',
  'historyPartitionMs',
  'defaultJobOptions',
  'connections',
] as const;
const RETENTION_KEYS = ['completedMs', 'cancelledMs', 'failedMs'] as const;
const EVENTS_KEYS = ['publish'] as const;
const JOB_LOGS_KEYS = ['maxLines', 'maxLineBytes', 'maxBytes'] as const;
const QUEUE_KEYS = [
  'name',
  'concurrency',
  'defaultJobOptions',
  'deadLetterQueue',
  'globalConcurrency',
  'limiter',
  'group',
  'repeat',
  'connection',
  'retention',
] as const;

/** Validates module options once, at boot, and fills in every default. */
export function resolveModuleOptions(o: PgQueueModuleOptions): ResolvedPgQueueOptions {
  if (typeof o !== 'object' || o === null) {
    throw new PgQueueConfigError('PgQueueModule.forRoot() expects an options object (it may be empty).');
  }
  refuseUnknownKeys('PgQueueModule options', o, KNOWN_MODULE_KEYS, {
    removeOnComplete: 'retention.completedMs',
    removeOnFail: 'retention.failedMs',
    connectTimeout: 'connectTimeoutMs (milliseconds)',
    connectTimeoutMS: 'connectTimeoutMs',
    connectionTimeoutMillis: 'connectTimeoutMs, or connection: { ..., connectionTimeoutMillis }',
  });
  if (o.retention !== undefined) {
    if (typeof o.retention !== 'object' || o.retention === null) {
      throw new PgQueueConfigError(`Invalid retention: ${quote(o.retention)}. Use { completedMs?, cancelledMs?, failedMs? }.`);
    }
    refuseUnknownKeys('retention', o.retention, RETENTION_KEYS);
  }
  const leaseMs = int('leaseMs', o.leaseMs, DEFAULTS.leaseMs, 1000);
  const heartbeatIntervalMs = int('heartbeatIntervalMs', o.heartbeatIntervalMs, Math.floor(leaseMs / 3), 100);
  if (heartbeatIntervalMs >= leaseMs) {
    throw new PgQueueConfigError(
      `heartbeatIntervalMs (${heartbeatIntervalMs}) must be shorter than leaseMs (${leaseMs}), ` +
        `or leases expire between heartbeats; a third of leaseMs is a good value.`,
    );
  }
  return {
    schema: validateSchemaName(o.schema ?? DEFAULTS.schema),
    migrate: bool('migrate', o.migrate, DEFAULTS.migrate),
    schemaOwner: schemaOwner(o.schemaOwner),
    workers: bool('workers', o.workers, DEFAULTS.workers),
    listen: bool('listen', o.listen, DEFAULTS.listen),
    pollIntervalMs: int('pollIntervalMs', o.pollIntervalMs, DEFAULTS.pollIntervalMs, 10),
    leaseMs,
    heartbeatIntervalMs,
    rescueIntervalMs: int('rescueIntervalMs', o.rescueIntervalMs, DEFAULTS.rescueIntervalMs, 100),
    vacuumAtDeadTuples: int('vacuumAtDeadTuples', o.vacuumAtDeadTuples, DEFAULTS.vacuumAtDeadTuples, 0),
    cronCatchUpMs: int('cronCatchUpMs', o.cronCatchUpMs, DEFAULTS.cronCatchUpMs, 0, 31 * 86_400_000),
    shutdownTimeoutMs: int('shutdownTimeoutMs', o.shutdownTimeoutMs, DEFAULTS.shutdownTimeoutMs, 0),
    connectTimeoutMs: int('connectTimeoutMs', o.connectTimeoutMs, DEFAULTS.connectTimeoutMs, 100, 600_000),
    poolSize: int('poolSize', o.poolSize, DEFAULTS.poolSize, 1, 100),
    maxPayloadBytes: int('maxPayloadBytes', o.maxPayloadBytes, DEFAULTS.maxPayloadBytes, 1, 256 * 1_048_576),
    progressIntervalMs: int('progressIntervalMs', o.progressIntervalMs, DEFAULTS.progressIntervalMs, 10, 3_600_000),
    maxProgressBytes: int('maxProgressBytes', o.maxProgressBytes, DEFAULTS.maxProgressBytes, 16, 1_048_576),
    jobLogs: jobLogs(o.jobLogs),
    asyncCommit: bool('asyncCommit', o.asyncCommit, DEFAULTS.asyncCommit),
    preparedStatements: bool('preparedStatements', o.preparedStatements, DEFAULTS.preparedStatements),
    events: events(o.events),
    handleUnhandledRejections: bool('handleUnhandledRejections', o.handleUnhandledRejections, DEFAULTS.handleUnhandledRejections),
    logJobFailures: oneOf('logJobFailures', o.logJobFailures, ['all', 'final', 'none'] as const, DEFAULTS.logJobFailures),
    retention: {
      completedMs: int('retention.completedMs', o.retention?.completedMs, DEFAULTS.retention.completedMs, 0, MAX_RETENTION_MS),
      cancelledMs: int('retention.cancelledMs', o.retention?.cancelledMs, DEFAULTS.retention.cancelledMs, 0, MAX_RETENTION_MS),
      failedMs:
        o.retention?.failedMs === undefined ? null : int('retention.failedMs', o.retention.failedMs, 0, 0, MAX_RETENTION_MS),
    },
    historyPartitionMs: historyPartitionMs(o.historyPartitionMs),
    defaultJobOptions: resolveJobDefaults('defaultJobOptions', o.defaultJobOptions, DEFAULTS.job),
  };
}

const HOUR_MS = 3_600_000;

/** `events`: an object with `publish`, a boolean. */
function events(v: unknown): ResolvedPgQueueOptions['events'] {
  if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) {
    throw new PgQueueConfigError(`Invalid events: ${quote(v)}. Use { publish?: boolean }.`);
  }
  const o = (v ?? {}) as NonNullable<PgQueueModuleOptions['events']>;
  refuseUnknownKeys('events', o, EVENTS_KEYS);
  return { publish: bool('events.publish', o.publish, DEFAULTS.events.publish) };
}

/** The caps of job.log(): an object of known keys, each a whole number in range, a line no larger than the whole. */
function jobLogs(v: unknown): ResolvedPgQueueOptions['jobLogs'] {
  if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) {
    throw new PgQueueConfigError(`Invalid jobLogs: ${quote(v)}. Use { maxLines?, maxLineBytes?, maxBytes? }.`);
  }
  const o = (v ?? {}) as NonNullable<PgQueueModuleOptions['jobLogs']>;
  refuseUnknownKeys('jobLogs', o, JOB_LOGS_KEYS);
  const d = DEFAULTS.jobLogs;
  const caps = {
    maxLines: int('jobLogs.maxLines', o.maxLines, d.maxLines, 1, 1_000_000),
    maxLineBytes: int('jobLogs.maxLineBytes', o.maxLineBytes, d.maxLineBytes, 16, 1_048_576),
    maxBytes: int('jobLogs.maxBytes', o.maxBytes, d.maxBytes, 16, 64 * 1_048_576),
  };
  if (caps.maxLineBytes > caps.maxBytes) {
    throw new PgQueueConfigError(
      `Invalid jobLogs: maxLineBytes (${caps.maxLineBytes}) is above maxBytes (${caps.maxBytes}), so a line of that ` +
        'length could never be kept. Lower maxLineBytes or raise maxBytes.',
    );
  }
  return caps;
}

/** A role name (any PostgreSQL identifier, compared as it is stored), false, or left out. */
function schemaOwner(v: unknown): string | false | null {
  if (v === undefined) return null;
  if (v === false) return false;
  if (typeof v === 'string' && v.length > 0 && v.length <= 63 && !v.includes('\0')) return v;
  throw new PgQueueConfigError(
    `Invalid schemaOwner: ${quote(v)}. Use the name of the role that owns the queue's schema (1-63 characters, ` +
      'as stored: lower-case unless it was created quoted), or false to skip the check.',
  );
}

/** Whole hours from one hour to 31 days: partitions start on the hour in UTC (days at midnight). */
function historyPartitionMs(value: unknown): number {
  const ms = int('historyPartitionMs', value, DEFAULTS.historyPartitionMs, HOUR_MS, 31 * 86_400_000);
  if (ms % HOUR_MS !== 0) {
    throw new PgQueueConfigError(
      `Invalid historyPartitionMs: ${ms} is not a whole number of hours. Use a multiple of 3600000 ` +
        `(3600000 for hourly partitions, 86400000 for daily), or leave it out for daily partitions.`,
    );
  }
  return ms;
}

/** Validates one `registerQueue` entry against the resolved module defaults. */
export function resolveQueueOptions(q: RegisterQueueOptions, base: ResolvedJobDefaults): ResolvedQueueOptions {
  if (typeof q !== 'object' || q === null) {
    throw new PgQueueConfigError("PgQueueModule.registerQueue() expects objects like { name: 'email' }.");
  }
  const name = validateQueueName(q.name);
  refuseUnknownKeys(`registerQueue({ name: ${quote(name)} })`, q, QUEUE_KEYS);
  return {
    name,
    concurrency: int(`queue "${name}" concurrency`, q.concurrency, DEFAULTS.concurrency, 1, 1000),
    defaultJobOptions: resolveQueueJobDefaults(name, q.defaultJobOptions, base),
    deadLetterQueue: deadLetter(name, q.deadLetterQueue),
    globalConcurrency:
      q.globalConcurrency === undefined ? null : int(`queue "${name}" globalConcurrency`, q.globalConcurrency, 1, 1, 100_000),
    limiter: limiter(`queue "${name}" limiter`, q.limiter),
    group: resolveGroup(name, q),
    repeat: resolveRepeat(name, q.repeat),
    connection:
      q.connection === undefined
        ? 'default'
        : validateConnectionName(q.connection, `registerQueue({ name: ${quote(name)} }) connection`),
    retention: queueRetention(name, q.retention),
  };
}

/** A queue's own retention: the module's fields and limits, only those given. */
function queueRetention(name: string, r: unknown): ResolvedQueueOptions['retention'] {
  if (r === undefined) return null;
  const where = `queue "${name}" retention`;
  if (typeof r !== 'object' || r === null || Array.isArray(r)) {
    throw new PgQueueConfigError(`Invalid ${where}: ${quote(r)}. Use { completedMs?, cancelledMs?, failedMs? }.`);
  }
  refuseUnknownKeys(where, r, RETENTION_KEYS, {
    removeOnComplete: 'completedMs',
    removeOnFail: 'failedMs',
    age: 'completedMs / cancelledMs / failedMs (milliseconds)',
    count: 'nothing: retention is by age',
  });
  const o = r as { completedMs?: unknown; cancelledMs?: unknown; failedMs?: unknown };
  const out: { completedMs?: number; cancelledMs?: number; failedMs?: number } = {};
  for (const k of RETENTION_KEYS) {
    if (o[k] !== undefined) out[k] = int(`${where}.${k}`, o[k] as number, 0, 0, MAX_RETENTION_MS);
  }
  return out;
}

const REPEAT_KEYS = ['name', 'cron', 'tz', 'payload'] as const;
/** BullMQ's repeat options (and the usual spellings of a time zone), and what they are here. */
const REPEAT_HINTS: Readonly<Record<string, string>> = {
  timezone: "tz (an IANA name such as 'Europe/Berlin')",
  timeZone: "tz (an IANA name such as 'Europe/Berlin')",
  tz_name: 'tz',
  pattern: "cron (such as '0 3 * * *')",
  every: "cron: an interval is a cron expression here, such as '*/5 * * * *' (every 5 minutes)",
  data: 'payload',
  jobName: 'name',
  startDate: 'nothing: a schedule starts with its next tick after the boot',
  endDate: 'nothing: remove the schedule to stop it',
  limit: 'nothing: remove the schedule to stop it',
  immediately: 'nothing: a schedule starts with its next tick after the boot',
  utc: "tz: 'UTC' (the default)",
};

function resolveRepeat(name: string, repeat: unknown): ResolvedSchedule[] {
  if (repeat === undefined) return [];
  if (!Array.isArray(repeat))
    throw new PgQueueConfigError(`queue "${name}" repeat must be an array of { name, cron, tz?, payload? }.`);
  const out = repeat.map((r: RepeatOptions, i) => {
    const where = `queue "${name}" repeat[${i}]`;
    if (typeof r === 'object' && r !== null) refuseUnknownKeys(where, r, REPEAT_KEYS, REPEAT_HINTS);
    return resolveSchedule(name, r, where);
  });
  const names = out.map((r) => r.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice) throw new PgQueueConfigError(`queue "${name}" repeat schedules job "${twice}" twice; one schedule per job name.`);
  return out;
}

/** registerQueue({ group }) (docs/groups.md). */
function resolveGroup(name: string, q: RegisterQueueOptions): ResolvedGroupOptions | null {
  const g: unknown = q.group;
  if (g === undefined) return null;
  const where = `queue "${name}" group`;
  if (typeof g !== 'object' || g === null || Array.isArray(g)) {
    throw new PgQueueConfigError(
      `Invalid ${where}: ${quote(g)}. Use { concurrency?, order?: 'fair' | 'fifo', limiter? }, or {} for fair turns only.`,
    );
  }
  refuseUnknownKeys(where, g, ['concurrency', 'order', 'limiter'], {
    maxConcurrency: 'concurrency',
    groupConcurrency: 'concurrency',
  });
  if (q.globalConcurrency !== undefined || q.limiter !== undefined) {
    throw new PgQueueConfigError(
      `queue "${name}" has group with globalConcurrency or limiter: a grouped queue takes per-group limits only (group.concurrency, group.limiter). Remove one of them.`,
    );
  }
  const o = g as { concurrency?: unknown; order?: unknown; limiter?: unknown };
  if (o.order !== undefined && o.order !== 'fair' && o.order !== 'fifo') {
    throw new PgQueueConfigError(`Invalid ${where}.order: ${quote(o.order)}. Use 'fair' (the default) or 'fifo'.`);
  }
  return {
    concurrency: o.concurrency === undefined ? null : int(`${where}.concurrency`, o.concurrency, 1, 1, 100_000),
    fifo: o.order === 'fifo',
    limiter: limiter(`${where}.limiter`, o.limiter),
  };
}

function limiter(where: string, l: unknown): { max: number; durationMs: number } | null {
  if (l === undefined) return null;
  if (typeof l !== 'object' || l === null) {
    throw new PgQueueConfigError(`${where} must be { max, durationMs }, for example { max: 10, durationMs: 1000 }.`);
  }
  refuseUnknownKeys(`${where}`, l, ['max', 'durationMs'], { duration: 'durationMs (milliseconds)' });
  const { max, durationMs } = l as { max?: unknown; durationMs?: unknown };
  if (max === undefined || durationMs === undefined) {
    throw new PgQueueConfigError(`${where} needs both max and durationMs, for example { max: 10, durationMs: 1000 }.`);
  }
  return {
    max: int(`${where}.max`, max, 1, 1, 10_000),
    durationMs: int(`${where}.durationMs`, durationMs, 1000, 1, 86_400_000),
  };
}

function deadLetter(name: string, dlq: unknown): string | null {
  if (dlq === undefined) return null;
  if (dlq === name) throw new PgQueueConfigError(`queue "${name}" deadLetterQueue names the queue itself; name another queue.`);
  try {
    return validateQueueName(dlq);
  } catch (err) {
    throw new PgQueueConfigError(`queue "${name}" deadLetterQueue: ${(err as Error).message}`);
  }
}
