import type { CanActivate, InjectionToken, ModuleMetadata, OptionalFactoryDependency, Type } from '@nestjs/common';
import { PgQueueConfigError } from '../core/errors';

/**
 * What a dashboard request wants to do; `authorize` gets it with every request. An action on one
 * job is `retry`, `cancel`, `remove` or `promote`; on several ids at once `retry-bulk`,
 * `cancel-bulk`, `remove-bulk` or `promote-bulk`; `retry-all` retries every failed job of a queue
 * (retry-failed). On a queue: `promote-all` (every delayed job, of a name), `clean` (finished jobs
 * older than an age), `drain` (every waiting and delayed job), and `retry-matching`,
 * `remove-matching`, `cancel-matching` (every job of a state and name; the filter is in `context`).
 */
export type DashboardAction =
  | 'read'
  | 'retry'
  | 'retry-bulk'
  | 'retry-all'
  | 'cancel'
  | 'cancel-bulk'
  | 'remove'
  | 'remove-bulk'
  | 'pause'
  | 'resume'
  | 'enqueue'
  | 'promote'
  | 'promote-bulk'
  | 'promote-all'
  | 'clean'
  | 'drain'
  | 'retry-matching'
  | 'remove-matching'
  | 'cancel-matching'
  | 'global-concurrency'
  | 'concurrency'
  | 'scheduler-pause'
  | 'scheduler-resume'
  | 'scheduler-run'
  | 'scheduler-remove';

/** The part of a request `authorize` sees: Express and Fastify requests both satisfy it. */
export interface DashboardRequest {
  /** The HTTP method (`GET` for reads; `POST`, `DELETE` for actions). */
  readonly method?: string;
  /** The request's path and query, as the server got it (with the dashboard's mount path). */
  readonly url?: string;
  /** The request headers, lower-case names (e.g. `authorization`, `cookie`). */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** What the app's own authentication put there (Passport and most auth guards set `req.user`). */
  readonly user?: unknown;
}

/**
 * What a request touches, for `authorize` to scope by: its third argument. Whole-dashboard reads
 * (pages, assets, overview, schedules, nodes) touch no queue in particular: `queues` is empty.
 */
export interface DashboardAccessContext {
  /** The queue the URL names (a queue page, its jobs, retry-all, pause, resume, enqueue), else null. */
  readonly queue: string | null;
  /**
   * Every queue the request touches: the URL's queue, or for a request by job ids (a job page,
   * retry, cancel, remove) the queues those jobs are in now (ids that match no job add none).
   */
  readonly queues: readonly string[];
  /** The connection (database) the request is on, by name; null: the default one, or not known. */
  readonly connection: string | null;
  /** The job ids the request names (a job page, retry, cancel, remove); empty otherwise. */
  readonly ids: readonly string[];
  /**
   * The list filter of a jobs read or a count (`state`, `name`, `uniqueKey`, `payload`, `group`,
   * `olderThanMs`), or what an action on a queue names in its body (`state`, `name`,
   * `olderThanMs`), as strings; null without one.
   */
  readonly filter: Readonly<Record<string, string>> | null;
}

/** Options of {@link PgQueueDashboardModule}. */
export interface PgQueueDashboardOptions {
  /** Mount point: starts with '/', then letters, digits, '_', '-' and '/'. @default '/queues' */
  readonly path?: string;
  /**
   * Decides each request (page, asset, API read or action): true lets it through, false answers
   * 403. Runs after `guards`, so base it on the user your own authentication set (`req.user`),
   * never on a header the client sends. `context` says which queues, connection, ids and filter
   * the request touches.
   * @example
   * authorize: (req, action, { queues }) => {
   *   const user = req.user as { roles: string[]; queues: string[] } | undefined;
   *   if (!user || !queues.every((q) => user.queues.includes(q))) return false;
   *   return action === 'read' || user.roles.includes('queue-admin');
   * }
   * @default undefined (every request that passes `guards` is allowed: protect the route)
   */
  readonly authorize?: (
    req: DashboardRequest,
    action: DashboardAction,
    context: DashboardAccessContext,
  ) => boolean | Promise<boolean>;
  /** Nest guards run on every dashboard route (page, assets and API), in this order. @default [] */
  readonly guards?: readonly Type<CanActivate>[];
  /** Hides the actions; every POST answers 403. @default false */
  readonly readOnly?: boolean;
  /**
   * Serve without guards or authorize: anyone who reaches the app sees every payload and may act
   * on every job. For local development only. @default false
   */
  readonly public?: boolean;
  /** How often the pages poll the API. @default 2000 */
  readonly refreshIntervalMs?: number;
  /** The pages' title. @default 'nestjs-pg-queue' */
  readonly title?: string;
  /**
   * The share of the time the dashboard may spend on the reads whose cost grows with the tables:
   * the counts per queue and the throughput chart, two reads. One that took `d` ms is answered
   * from memory for the next `d * (2 / countsBudget - 1)` ms (and afresh after any dashboard
   * action), so however busy the tables are, open pages keep the database counting at most this
   * share of the time. A count taking 20 ms is redone at every 2 s poll; one taking a second while
   * 200,000 jobs drain, every 39 s. 1 counts afresh on every request. From 0.01 to 1.
   * @default 0.05
   */
  readonly countsBudget?: number;
  /**
   * The longest any dashboard statement may run (`SET LOCAL statement_timeout`): past it the read
   * is cancelled and answers 503, so an open page can never hold a scan of a huge table. From 100
   * to 600000. @default 10000
   */
  readonly statementTimeoutMs?: number;
}

/** The options `registerAsync`'s factory returns: all but the mount point and guards, which routes need up front. */
export type PgQueueDashboardFactoryOptions = Omit<PgQueueDashboardOptions, 'path' | 'guards'>;

/** Options of `PgQueueDashboardModule.registerAsync`. */
export interface PgQueueDashboardAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Routes are declared with the module, before any factory runs: the path is given here. @default '/queues' */
  readonly path?: string;
  /** Guards are attached to the routes when they are declared, so they are given here too. @default [] */
  readonly guards?: readonly Type<CanActivate>[];
  /** Providers whose instances `useFactory` receives, in order. @default [] */
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Returns the other options (method syntax, so a factory typed with its own parameters fits). */
  useFactory(...args: unknown[]): PgQueueDashboardFactoryOptions | Promise<PgQueueDashboardFactoryOptions>;
}

/** The options after validation and defaults. */
export interface ResolvedDashboardOptions {
  readonly path: string;
  readonly authorize: PgQueueDashboardOptions['authorize'] | null;
  readonly guards: readonly Type<CanActivate>[];
  readonly readOnly: boolean;
  readonly public: boolean;
  readonly refreshIntervalMs: number;
  readonly title: string;
  readonly countsBudget: number;
  readonly statementTimeoutMs: number;
}

/** Every default in one place. */
export const DASHBOARD_DEFAULTS = {
  path: '/queues',
  readOnly: false,
  public: false,
  refreshIntervalMs: 2000,
  title: 'nestjs-pg-queue',
  countsBudget: 0.05,
  statementTimeoutMs: 10_000,
} as const;

const KEYS = [
  'path',
  'authorize',
  'guards',
  'readOnly',
  'public',
  'refreshIntervalMs',
  'title',
  'countsBudget',
  'statementTimeoutMs',
];

/** Throws unless `path` is a mount point; returns it without a trailing '/'. */
export function resolveDashboardPath(path: unknown): string {
  if (path === undefined) return DASHBOARD_DEFAULTS.path;
  const p = typeof path === 'string' ? path.replace(/\/+$/, '') : path;
  if (typeof p !== 'string' || !/^(\/[A-Za-z0-9_-]+)+$/.test(p)) {
    throw new PgQueueConfigError(
      `PgQueueDashboardModule path ${JSON.stringify(path)} is not valid: use '/' followed by letters, digits, '_', '-' ` +
        `and '/' (no '//', not the root alone), for example '/queues' or '/admin/queues'.`,
    );
  }
  return p;
}

/** Validates the options once, at boot, with messages that say what to change. */
export function resolveDashboardOptions(o: PgQueueDashboardOptions): ResolvedDashboardOptions {
  if (typeof o !== 'object' || o === null)
    throw new PgQueueConfigError('PgQueueDashboardModule options must be an object, for example { guards: [AdminGuard] }.');
  const unknown = Object.keys(o).filter((k) => !KEYS.includes(k));
  if (unknown.length)
    throw new PgQueueConfigError(
      `PgQueueDashboardModule got unknown option(s) ${unknown.join(', ')}; known: ${KEYS.join(', ')}.`,
    );
  if (o.authorize !== undefined && typeof o.authorize !== 'function') {
    throw new PgQueueConfigError(
      'PgQueueDashboardModule authorize must be a function (req, action, context) => boolean | Promise<boolean>.',
    );
  }
  if (o.guards !== undefined && (!Array.isArray(o.guards) || o.guards.some((g) => typeof g !== 'function'))) {
    throw new PgQueueConfigError('PgQueueDashboardModule guards must be an array of guard classes, for example [AdminGuard].');
  }
  for (const k of ['readOnly', 'public'] as const) {
    if (o[k] !== undefined && typeof o[k] !== 'boolean')
      throw new PgQueueConfigError(`PgQueueDashboardModule ${k} must be true or false.`);
  }
  const refresh = o.refreshIntervalMs ?? DASHBOARD_DEFAULTS.refreshIntervalMs;
  if (!Number.isInteger(refresh) || refresh < 250 || refresh > 3_600_000) {
    throw new PgQueueConfigError(
      `PgQueueDashboardModule refreshIntervalMs must be an integer from 250 to 3600000 (got ${JSON.stringify(o.refreshIntervalMs)}).`,
    );
  }
  const title = o.title ?? DASHBOARD_DEFAULTS.title;
  if (typeof title !== 'string' || title.length === 0 || title.length > 200) {
    throw new PgQueueConfigError('PgQueueDashboardModule title must be a non-empty string of at most 200 characters.');
  }
  const countsBudget = o.countsBudget ?? DASHBOARD_DEFAULTS.countsBudget;
  if (typeof countsBudget !== 'number' || !(countsBudget >= 0.01 && countsBudget <= 1)) {
    throw new PgQueueConfigError(
      `PgQueueDashboardModule countsBudget must be a number from 0.01 to 1, the share of time counting may take (got ${JSON.stringify(o.countsBudget)}).`,
    );
  }
  const statementTimeoutMs = o.statementTimeoutMs ?? DASHBOARD_DEFAULTS.statementTimeoutMs;
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 100 || statementTimeoutMs > 600_000) {
    throw new PgQueueConfigError(
      `PgQueueDashboardModule statementTimeoutMs must be an integer from 100 to 600000, the longest a dashboard statement may run (got ${JSON.stringify(o.statementTimeoutMs)}).`,
    );
  }
  const guards = o.guards ?? [];
  if (!o.authorize && guards.length === 0 && o.public !== true) {
    throw new PgQueueConfigError(
      'PgQueueDashboardModule shows job payloads and can retry, cancel and remove jobs, so it serves nothing until ' +
        'you decide who may use it. Pass guards: [YourAuthGuard] (Nest guards, run on every dashboard route), or ' +
        'authorize: (req, action) => boolean, or public: true to serve it to anyone who reaches the app (local development only).',
    );
  }
  return {
    path: resolveDashboardPath(o.path),
    authorize: o.authorize ?? null,
    guards,
    readOnly: o.readOnly ?? DASHBOARD_DEFAULTS.readOnly,
    public: o.public ?? DASHBOARD_DEFAULTS.public,
    refreshIntervalMs: refresh,
    title,
    countsBudget,
    statementTimeoutMs,
  };
}

/** DI token of the resolved options. */
export const PG_QUEUE_DASHBOARD_OPTIONS = Symbol('PG_QUEUE_DASHBOARD_OPTIONS');
