import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { EMPTY_COUNTS, type JobOptions } from '../core/job';
import type { ResolvedJobDefaults } from '../core/options/resolved';
import { PgQueueError } from '../core/errors';
import type { DashboardFlow, DashboardJob, DashboardReads } from '../core/dashboard-reads';
import { stepOf } from '../core/job-scheduler';
import type { JobLogsPage } from '../core/job-logs';
import { createDashboardReads } from '../module/dashboard-reads';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { PgQueueRuntime } from '../module/pg-queue.runtime';
import { CostlyReads } from './costly-reads';
import { DashboardInputError, encodeCursor, type JobListQuery } from './dashboard-input';
import { PG_QUEUE_DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';
import { MinuteCounts, sumByMinute } from './dashboard-throughput';
import { timeline, type TimelineEntry } from './job-timeline';
import { RecentNames } from './recent-names';
import { summary, type JobSummary } from './job-summary';

export { timeline, type TimelineEntry } from './job-timeline';
export type { JobSummary } from './job-summary';
import { stepView } from './job-step-view';

/** How many groups a queue page's Groups panel lists. */
export const DASHBOARD_GROUPS = 20;

/**
 * Builds every dashboard answer from the queue runtime (its connections' pools and stores, and
 * the registered queues). With more than one connection, every answer covers each database:
 * queues, schedules and nodes carry their `connection`, and a job is found by id in the database
 * its `connection` names (ids are per database), else in each in turn, the default first.
 */
@Injectable()
export class DashboardService implements OnApplicationBootstrap {
  /** The default connection's store. */
  readonly store: DashboardReads;
  private readonly stores = new Map<string, DashboardReads>();
  private readonly minutes = new Map<string, MinuteCounts>();
  /** The connection a queue no node registers was last seen on (the overview lists it with it). */
  private readonly seenOn = new Map<string, string>();

  constructor(
    @Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime,
    @Inject(PG_QUEUE_DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
  ) {
    for (const c of runtime.connections) {
      // Half the pool at most (the workers share it), and at least one connection.
      const connections = Math.max(1, Math.floor(c.options.poolSize / 2));
      const store = createDashboardReads(c, connections, options.statementTimeoutMs);
      this.stores.set(c.name, store);
      this.minutes.set(c.name, new MinuteCounts(store));
    }
    this.store = this.stores.get(runtime.connections[0].name)!;
    this.costly = new CostlyReads(options.countsBudget);
  }

  /** The counts and the throughput: reused while recent compared with their cost (countsBudget). */
  private readonly costly: CostlyReads;

  /** Each queue's job names, kept a while (they change rarely): the queue page asks every poll. */
  private readonly recentNames = new RecentNames();

  /** Mounted for anyone: say so at every boot, so it is not shipped by accident. */
  onApplicationBootstrap(): void {
    const o = this.options;
    if (!o.authorize && o.guards.length === 0) {
      new Logger('PgQueueDashboard').warn(
        `The dashboard at ${o.path} is public (public: true, no guards, no authorize): anyone who reaches this app sees ` +
          `every job's payload${o.readOnly ? '' : ' and can retry, cancel and remove jobs'}. Pass guards: [YourAuthGuard] ` +
          'and authorize: (req, action, context) => ... based on req.user before it runs anywhere but your machine.',
      );
    }
  }

  /**
   * Every queue's counts of one connection: the overview's, and a queue page's too (it picks its
   * row), so an open overview and queue page share one count. Counting one queue costs little
   * less than all when one queue holds most jobs, the case where counting is costly.
   */
  private counts(connection: string) {
    const registered = this.registered(connection);
    return this.costly.read(`counts ${connection} ${registered.join(',')}`, () =>
      this.stores.get(connection)!.counts(registered),
    );
  }

  /** After an action: its effect shows on the next read. */
  changed<T>(result: T): T {
    this.costly.clear();
    this.recentNames.clear();
    return result;
  }

  /** The connection names, the default first. */
  private get names(): string[] {
    return [...this.stores.keys()];
  }

  /** The connection of a queue: where it is registered, else where the overview last saw it. */
  private connectionOf(queue: string): string {
    return this.runtime.queueOptions(queue) ? this.runtime.connectionOf(queue).name : (this.seenOn.get(queue) ?? this.names[0]);
  }

  /** The connection a queue is on, by name (for `authorize`'s context). */
  connectionOfQueue(queue: string): string {
    return this.connectionOf(queue);
  }

  /**
   * The queues the jobs of these ids are in now (for `authorize`'s context): in the named
   * connection's database, else in each. A request for an unknown connection answers 400 here.
   */
  async queuesOf(ids: readonly string[], connection: string | null): Promise<string[]> {
    const names = connection === null ? this.names : [connection];
    const found = await Promise.all(names.map((n) => this.storeNamed(n).locate(ids)));
    return [...new Set(found.flat().map((j) => j.queue))].sort();
  }

  private storeOf(queue: string): DashboardReads {
    return this.stores.get(this.connectionOf(queue))!;
  }

  /** The store a job action or lookup names, the default one when none is named. */
  private storeNamed(connection: string | null): DashboardReads {
    const store = this.stores.get(connection ?? this.names[0]);
    if (!store)
      throw new DashboardInputError(
        `No connection "${connection}" in this app; its connections: ${this.names.map((n) => `"${n}"`).join(', ')}.`,
      );
    return store;
  }

  /** The reads of the database a queue is on (DashboardOperations: counts). */
  readsOfQueue(queue: string): DashboardReads {
    return this.storeOf(queue);
  }

  /** Where these ids are now, in the named connection's database (the default when null). */
  locate(ids: readonly string[], connection: string | null): Promise<{ id: string; queue: string; state: string }[]> {
    return this.storeNamed(connection).locate(ids);
  }

  /** Each connection (the default first) with the queues it holds: registered here, or with jobs (the overview's counts). */
  async queuesByConnection(): Promise<{ connection: string; queues: string[] }[]> {
    return Promise.all(
      this.names.map(async (connection) => ({
        connection,
        queues: [...new Set([...this.registered(connection), ...(await this.counts(connection)).map((q) => q.name)])],
      })),
    );
  }

  /** Every database's throughput, summed per minute. */
  private async throughput() {
    return this.costly.read('throughput', async () =>
      sumByMinute(await Promise.all(this.names.map((n) => this.minutes.get(n)!.read()))),
    );
  }

  private registered(connection: string): string[] {
    return this.runtime.registeredQueues.filter((q) => q.connection === connection).map((q) => q.name);
  }

  /** Every queue's counts and the recent throughput, across the connections (`GET api/overview`). */
  async overview() {
    const [perConnection, t] = await Promise.all([Promise.all(this.names.map((n) => this.counts(n))), this.throughput()]);
    const queues = perConnection.flatMap((rows, i) =>
      rows.map((q) => {
        const registered = this.runtime.queueOptions(q.name) !== undefined;
        if (!registered) this.seenOn.set(q.name, this.names[i]);
        return { ...q, registered, connection: this.names[i] };
      }),
    );
    return {
      queues,
      connections: this.names,
      throughput: { minutes: t.minutes, completed: t.completed, failed: t.failed },
      readOnly: this.options.readOnly,
      now: t.now,
    };
  }

  /** One queue's counts and options, and the job names seen in it lately (`GET api/queues/:queue`). */
  async queue(name: string) {
    const connection = this.connectionOf(name);
    const store = this.stores.get(connection)!;
    const [all, names] = await Promise.all([
      this.counts(connection),
      this.recentNames.read(`${connection} ${name}`, () => store.names(name)),
    ]);
    const found = all.find((q) => q.name === name);
    const o = this.runtime.queueOptions(name);
    // A queue nothing knows of (no jobs, no history, not registered, never paused) answers zeros.
    const { name: _n, paused, ...rest } = found ?? { name, ...EMPTY_COUNTS, cancelled: 0, paused: false };
    // The page keys its tabs by state name.
    const { waitingChildren, waitingSignal, ...live } = rest;
    return {
      name,
      connection,
      counts: { ...live, 'waiting-children': waitingChildren, 'waiting-signal': waitingSignal },
      paused,
      options: o
        ? {
            concurrency: o.concurrency,
            globalConcurrency: o.globalConcurrency,
            limiter: o.limiter,
            deadLetterQueue: o.deadLetterQueue,
            defaultJobOptions: shownDefaults(o.defaultJobOptions),
          }
        : null,
      retention: this.runtime.connectionOf(name).options.retention,
      names: [...new Set([...names, ...(o?.repeat.map((r) => r.name) ?? [])])].sort(),
    };
  }

  /**
   * A queue's busiest groups, the first DASHBOARD_GROUPS by active + waiting, from one bounded read
   * (`GET api/queues/:queue/groups`); a costly read, as the counts are (countsBudget).
   */
  async groups(name: string) {
    const connection = this.connectionOf(name);
    const g = await this.costly.read(`groups ${connection} ${name}`, () =>
      this.stores.get(connection)!.groups(name, DASHBOARD_GROUPS),
    );
    return { ...g, connection, top: DASHBOARD_GROUPS };
  }

  /** A page of a queue's jobs, filtered by state and name; `next` is the cursor of the next page (`GET api/queues/:queue/jobs`). */
  async jobs(queue: string, q: JobListQuery): Promise<{ jobs: JobSummary[]; next: string | null }> {
    const store = this.storeOf(queue);
    if (q.id !== null) {
      const job = await store.job(q.id);
      // By id: the job of this queue in whatever state it is now (a list by state would miss it once it moved).
      return { jobs: job && job.queue === queue ? [summary(job)] : [], next: null };
    }
    const page = await store.listJobs(queue, q.state, q.filters, q.cursor, q.limit);
    return { jobs: page.jobs.map(summary), next: page.next ? encodeCursor(page.next) : null };
  }

  /** A job by id, in the named connection's database, else in each in turn (the default first); with its flow. */
  async job(
    id: string,
    connection: string | null = null,
  ): Promise<{ job: DashboardJob; timeline: TimelineEntry[]; connection: string; flow: DashboardFlow | null } | null> {
    for (const name of connection === null ? this.names : [connection]) {
      const store = this.storeNamed(name);
      const [job, flow] = await Promise.all([store.job(id), store.flow(id)]);
      if (job) return { job, timeline: timeline(job), connection: name, flow };
    }
    return null;
  }

  /** A page of a job's log (`GET api/jobs/:id/logs`), in the named connection's database, else in each in turn. */
  async jobLogs(id: string, offset: number, limit: number, connection: string | null = null): Promise<JobLogsPage | null> {
    for (const name of connection === null ? this.names : [connection]) {
      const page = await this.storeNamed(name).jobLogs(id, offset, limit);
      if (page) return page;
    }
    return null;
  }

  /**
   * A job's durable steps (`GET api/jobs/:id/steps`), in the named connection's database, else
   * the first database that has any; each with its duration, a sleep past its time shown done.
   */
  async jobSteps(id: string, connection: string | null = null) {
    for (const name of connection === null ? this.names : [connection]) {
      const { nowMs, steps } = await this.storeNamed(name).jobSteps(id);
      if (steps.length === 0) continue;
      return { steps: steps.map((s) => stepView(s, nowMs)) };
    }
    return { steps: [] };
  }

  /**
   * The job schedulers of every queue in every database, code-declared and runtime, each with its
   * next five ticks (`GET api/schedules`).
   */
  async schedules() {
    const all = await Promise.all(
      this.names.map(async (connection) => (await this.stores.get(connection)!.schedulers()).map((s) => ({ ...s, connection }))),
    );
    const schedules = all.flat().map((s) => {
      const next: string[] = [];
      try {
        const step = stepOf({ pattern: s.pattern, everyMs: s.everyMs, tz: s.tz }, 'dashboard');
        for (let t = s.next, i = 0; t && i < 5 && (!s.endAt || t <= s.endAt); i++, t = step(t)) next.push(t.toISOString());
      } catch {
        // A pattern this version cannot read (stored by a newer one): listed without its ticks.
      }
      return {
        queue: s.queue,
        id: s.id,
        name: s.name,
        connection: s.connection,
        cron: s.pattern,
        every: s.everyMs,
        tz: s.tz,
        paused: s.paused,
        source: s.source,
        iterationCount: s.count,
        limit: s.limit,
        next: s.paused ? next.slice(0, 1) : next,
      };
    });
    return { schedules: schedules.sort((a, b) => a.queue.localeCompare(b.queue) || a.id.localeCompare(b.id)) };
  }

  /** The live nodes of each database's registry (a node with queues on two databases is in both). */
  async nodes() {
    const all = await Promise.all(
      this.names.map(async (connection) =>
        (await this.stores.get(connection)!.nodes()).map(({ heartbeatMs: _h, ...n }) => ({ ...n, connection })),
      ),
    );
    return { nodes: all.flat() };
  }

  /** Puts these failed, cancelled or completed jobs back to waiting with fresh attempts; returns the ids it retried (`POST api/jobs/retry`). */
  async retry(ids: string[], connection: string | null = null) {
    return this.changed({ retried: await this.storeNamed(connection).retryIds(ids) });
  }

  /** The runtime store of the connection a job action names (the default when none is named). */
  private jobStoreNamed(connection: string | null) {
    this.storeNamed(connection);
    return this.runtime.connections.find((c) => c.name === (connection ?? this.names[0]))!.store;
  }

  /**
   * Cancels these live jobs: a waiting one at once (`cancelled`), a running one by aborting its
   * `job.signal` (`cancelling`, until its handler returns) (`POST api/jobs/cancel`).
   */
  async cancel(ids: string[], connection: string | null = null) {
    const cancelled: string[] = [];
    const cancelling: string[] = [];
    const store = this.jobStoreNamed(connection);
    for (const j of await this.storeNamed(connection).locate(ids)) {
      if (j.state !== 'waiting' && j.state !== 'active' && j.state !== 'waiting-children') continue;
      const r = await store.cancel(j.queue, j.id);
      if (r === 'cancelled') cancelled.push(j.id);
      else if (r === 'cancelling') cancelling.push(j.id);
    }
    return this.changed({ cancelled, cancelling });
  }

  /** Deletes these jobs, waiting or finished (never a running one); returns the ids it removed (`POST api/jobs/remove`). */
  async remove(ids: string[], connection: string | null = null) {
    const removed: string[] = [];
    const store = this.jobStoreNamed(connection);
    for (const j of await this.storeNamed(connection).locate(ids)) {
      if (await store.remove(j.queue, j.id)) removed.push(j.id);
    }
    return this.changed({ removed });
  }

  /** Retries every failed job of the queue, or of one job name in it (`POST api/queues/:queue/retry-failed`). */
  async retryFailed(queue: string, name: string | null) {
    return this.changed({ retried: await this.storeOf(queue).retryFailed(queue, name) });
  }

  /** Pauses the queue (its workers claim nothing more; running jobs finish) or resumes it (`POST api/queues/:queue/pause`, `resume`). */
  async setPaused(queue: string, paused: boolean) {
    await this.jobStoreNamed(this.connectionOf(queue)).setPaused(queue, paused);
    return this.changed({ paused });
  }

  /** Adds a job, as `Queue.add` would; a refusal of its input is a `DashboardInputError` (`POST api/queues/:queue/jobs`). */
  async enqueue(queue: string, body: { name: string; payload: unknown; options: Record<string, unknown> }) {
    try {
      const job = await this.runtime.queue(queue, 'dashboard enqueue').add(body.name, body.payload, body.options as JobOptions);
      return this.changed({ job, connection: this.connectionOf(queue) });
    } catch (err) {
      // Every refusal of add() (unregistered queue, bad name, payload or option) is the caller's to fix.
      if (err instanceof PgQueueError) throw new DashboardInputError(err.message, { cause: err });
      throw err;
    }
  }
}

/** A queue's job defaults as the page shows them: a default group function named, not its code. */
function shownDefaults(d: ResolvedJobDefaults): Omit<ResolvedJobDefaults, 'groupOf'> & { group?: string } {
  const { groupOf, ...rest } = d;
  return groupOf ? { ...rest, group: '(a function of the payload)' } : rest;
}
