import type {
  DashboardScheduler,
  DashboardFlow,
  DashboardJob,
  DashboardReads,
  FlowLink,
  ListFilters,
  ListKey,
  ListState,
  NodeInfo,
  QueueOverviewRow,
  Throughput,
} from '../core/dashboard-reads';
import type { QueueGroupCounts } from '../core/group-counts';
import type { JobLogsPage } from '../core/job-logs';
import { isJobId } from '../core/names';
import type { PgPool } from '../core/pg-types';
import { traceIdOf } from '../core/telemetry';
import { buildDashboardQueries, buildJobList, FILTER_SCAN_LIMIT, MAX_ROWS, type DashboardQueries } from './dashboard-queries';
import { bounded, limited, type Gate } from './dashboard/executor';
import { buildMatchCount } from './dashboard/match-count';
import { groupCountsSql, readGroupCounts } from './group-counts';
import { type SqlExecutor } from './executor';
import { buildFlowQueries, type FlowQueries } from './flows';
import { HistoryLayoutCache } from './history/by-id';
import { logStatements, readLogPage } from './job-logs';
import { loadSteps, stepStatements, type RecordedSteps } from './steps';
import { schemaSql } from './store-context';
import { rowToJob, type JobRow } from './job-row';

const EMPTY_LIVE = {
  waiting: 0,
  delayed: 0,
  active: 0,
  stalled: 0,
  waitingChildren: 0,
  sleeping: 0,
  waitingSignal: 0,
  paused: false,
  oldestWaitingAgeMs: null,
} as const;

type ListRow = JobRow & {
  unique_key: string | null;
  locked_by: string | null;
  run_at_key: string | null;
  scanned: number;
  scan_end: ListKey | null;
};

/** The dashboard's reads (and its writes the engine has none for), on the queue's own pool. */
export class DashboardStore implements DashboardReads {
  readonly q: DashboardQueries;
  private readonly db: SqlExecutor;

  /**
   * `maxConcurrent`: how many of the pool's connections the dashboard may hold at once. The
   * workers share that pool: while a poll's reads held three of its four connections, each for
   * as long as a count over a table in full churn takes (a second, 200,000 jobs draining), claims
   * and completions queued behind them.
   */
  private readonly flows: FlowQueries;

  constructor(
    pool: PgPool,
    private readonly schema: string,
    private readonly channel: string,
    maxConcurrent = 2,
    /** Every statement runs under `SET LOCAL statement_timeout` of this many ms (bounded). */
    statementTimeoutMs = 10_000,
  ) {
    this.q = buildDashboardQueries(schema);
    this.flows = buildFlowQueries(schema);
    const gate: Gate = { max: maxConcurrent, running: 0, waiting: [] };
    this.db = limited(bounded(pool, statementTimeoutMs, false), gate);
    this.noJit = limited(bounded(pool, statementTimeoutMs, true), gate);
    this.layout = new HistoryLayoutCache(this.db, schema);
  }

  /** The throughput's reads (JIT off), sharing the turns of `db`. */
  private readonly noJit: SqlExecutor;

  /** Which statement the job page's lookups take (history/by-id.ts). */
  private readonly layout: HistoryLayoutCache;

  /**
   * Figures per queue: all of them (and every registered one), or one. The live and the
   * history counts are two statements run at once, each on its own connection of the pool,
   * sorted by name (code points) here.
   */
  async counts(registered: readonly string[], queue: string | null = null): Promise<QueueOverviewRow[]> {
    const [live, history] = await Promise.all([
      this.db.query<{
        name: string;
        waiting: number;
        delayed: number;
        active: number;
        stalled: number;
        waiting_children: number;
        sleeping: number;
        waiting_signal: number;
        paused: boolean;
        oldest_waiting_age_ms: number | null;
      }>(this.q.liveCounts, [registered, queue]),
      this.db.query<{ name: string; failed: number; cancelled: number }>(this.q.historyCounts, [queue]),
    ]);
    const finished = new Map(history.map((h) => [h.name, h]));
    const rows = live.map((r) => ({
      name: r.name,
      waiting: r.waiting,
      delayed: r.delayed,
      active: r.active,
      stalled: r.stalled,
      failed: finished.get(r.name)?.failed ?? 0,
      cancelled: finished.get(r.name)?.cancelled ?? 0,
      waitingChildren: r.waiting_children,
      sleeping: r.sleeping,
      waitingSignal: r.waiting_signal,
      paused: r.paused,
      oldestWaitingAgeMs: r.oldest_waiting_age_ms === null ? null : Math.max(0, Math.round(r.oldest_waiting_age_ms)),
    }));
    const listed = new Set(live.map((r) => r.name));
    // A queue with only history: no live jobs, no queues row, not registered here.
    for (const h of history) {
      if (listed.has(h.name)) continue;
      rows.push({ ...EMPTY_LIVE, name: h.name, failed: h.failed, cancelled: h.cancelled });
    }
    return rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, MAX_ROWS);
  }

  /** Per minute over the last hour; minutes before `from` (if given) come back as 0. */
  async throughput(from: Date | null = null): Promise<Throughput> {
    const rows = await this.noJit.query<{ minute: Date; completed: number; failed: number; now: Date }>(this.q.throughput, [
      from,
    ]);
    return {
      minutes: rows.map((r) => r.minute.toISOString()),
      completed: rows.map((r) => r.completed),
      failed: rows.map((r) => r.failed),
      now: rows[rows.length - 1]?.now ?? new Date(),
    };
  }

  async names(queue: string): Promise<string[]> {
    return (await this.db.query<{ name: string }>(this.q.names, [queue])).map((r) => r.name);
  }

  /**
   * One page of a queue's jobs in a state. `next` is where the following page starts, or null
   * at the end. A filtered page examines at most FILTER_SCAN_LIMIT jobs, so it may hold fewer
   * than `limit` (even none) and still have a `next`.
   */
  async listJobs(
    queue: string,
    state: ListState,
    filters: ListFilters,
    cursor: ListKey | null,
    limit: number,
  ): Promise<{ jobs: (DashboardJob & { runAtKey: string })[]; next: ListKey | null }> {
    const { text, values } = buildJobList(this.schema, state, { queue, cursor, filters, limit });
    const rows = await this.db.query<ListRow>(text, values);
    const { scanned, scan_end } = rows[0];
    const found = rows.filter((r) => r.id !== null);
    const page = found.slice(0, limit);
    const history = !(state === 'waiting' || state === 'delayed' || state === 'active' || state === 'waiting-children');
    const jobs = page.map((r) => ({
      ...rowToJob(r),
      uniqueKey: r.unique_key,
      lockedBy: r.locked_by,
      history,
      runAtKey: r.run_at_key as string,
    }));
    let next: ListKey | null = null;
    const claimOrder = state === 'waiting' || state === 'delayed';
    const keyOf = (j: (typeof jobs)[number]): ListKey =>
      claimOrder ? { priority: j.priority, runAt: j.runAtKey, id: j.id } : { id: j.id };
    if (found.length > limit) next = keyOf(jobs[jobs.length - 1]);
    else if (scanned >= FILTER_SCAN_LIMIT && (filters.name !== undefined || filters.payloadJson !== undefined) && scan_end) {
      next = claimOrder
        ? {
            priority: Number((scan_end as { priority: number }).priority),
            runAt: String((scan_end as { runAt: string }).runAt),
            id: String(scan_end.id),
          }
        : { id: String(scan_end.id) };
    }
    return { jobs, next };
  }

  /** One job, live or finished, or null. */
  async job(id: string): Promise<DashboardJob | null> {
    if (!isJobId(id)) return null;
    const rows = await this.layout.read(this.q.jobIn, id, (sql, values) =>
      this.db.query<JobRow & { unique_key: string | null; locked_by: string | null; history: boolean; trace: unknown }>(
        sql,
        values,
      ),
    );
    if (!rows.length) return null;
    const r = rows[0];
    return { ...rowToJob(r), uniqueKey: r.unique_key, lockedBy: r.locked_by, history: r.history, traceId: traceIdOf(r.trace) };
  }

  /**
   * A job's place in a flow for its page: the jobs that wait on it, and its first 100 children
   * with their states (the children read of job.childResults, limited), or null for a job in no flow.
   */
  async flow(id: string): Promise<DashboardFlow | null> {
    if (!isJobId(id)) return null;
    const [parents, [counts], children] = await Promise.all([
      this.db.query<FlowLink>(this.q.parents, [id]),
      this.db.query<{ total: number; pending: number }>(this.q.childCounts, [id]),
      this.db.query<FlowLink>(this.flows.children, [id, 100]),
    ]);
    if (parents.length === 0 && counts.total === 0) return null;
    return {
      parents,
      children: children.map((c) => ({ id: c.id, queue: c.queue, name: c.name, state: c.state })),
      childrenTotal: counts.total,
      childrenPending: counts.pending,
    };
  }

  /** A page of a job's log, any queue (job-logs.ts), on the dashboard's bounded connections. */
  async jobLogs(id: string, offset: number, limit: number): Promise<JobLogsPage | null> {
    if (!isJobId(id)) return null;
    this.logPages ??= logStatements(schemaSql(this.schema), this.schema).pageIn;
    return readLogPage(this.db, this.layout, this.logPages, null, id, offset, limit);
  }

  private logPages: ReturnType<typeof logStatements>['pageIn'] | null = null;

  /** A job's durable steps (migration 0018), oldest first, and the database's clock; none for a bad id. */
  async jobSteps(id: string): Promise<RecordedSteps> {
    if (!isJobId(id)) return { nowMs: Date.now(), steps: [] };
    this.stepsLoad ??= stepStatements(schemaSql(this.schema)).load;
    return loadSteps(this.db, this.stepsLoad, id);
  }

  private stepsLoad: string | null = null;

  /** The queue and state of each id found (live or finished). */
  async locate(ids: readonly string[]): Promise<{ id: string; queue: string; state: string }[]> {
    return this.db.query(this.q.locate, [ids]);
  }

  async nodes(): Promise<NodeInfo[]> {
    const rows = await this.db.query<{
      id: string;
      host: string;
      pid: number;
      started_at: Date;
      last_seen_at: Date;
      heartbeat_ms: number;
      queues: { name: string; concurrency: number }[];
      running: number;
    }>(this.q.nodes, []);
    return rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: r.pid,
      startedAt: r.started_at,
      lastSeenAt: r.last_seen_at,
      heartbeatMs: r.heartbeat_ms,
      queues: r.queues,
      running: r.running,
    }));
  }

  /** The job schedulers of every queue, by queue and id (capped). */
  async schedulers(): Promise<DashboardScheduler[]> {
    const rows = await this.db.query<{
      queue: string;
      id: string;
      job_name: string;
      pattern: string | null;
      every_ms: string | null;
      tz: string;
      next_run_at: Date | null;
      paused: boolean;
      source: 'code' | 'runtime';
      count: number;
      limit: number | null;
      end_at: Date | null;
    }>(this.q.schedules, []);
    return rows.map((r) => ({
      queue: r.queue,
      id: r.id,
      name: r.job_name,
      pattern: r.pattern,
      everyMs: r.every_ms === null ? null : Number(r.every_ms),
      tz: r.tz,
      next: r.next_run_at,
      paused: r.paused,
      source: r.source,
      count: r.count,
      limit: r.limit,
      endAt: r.end_at,
    }));
  }

  /**
   * How many jobs of a queue are in a state (of one name; finished more than `olderThanMs` ago),
   * counting at most `cap` (dashboard/match-count.ts).
   */
  async countMatching(
    queue: string,
    state: ListState,
    name: string | null,
    olderThanMs: number | null,
    cap: number,
  ): Promise<number> {
    const { text, values } = buildMatchCount(this.schema, state, { queue, name, olderThanMs, cap });
    const [r] = await this.db.query<{ n: number }>(text, values);
    return r.n;
  }

  /** A queue's busiest groups (group-counts.ts), on the dashboard's bounded connections. */
  async groups(queue: string, top: number): Promise<QueueGroupCounts> {
    this.groupSql ??= groupCountsSql(this.schema);
    return readGroupCounts(this.db, this.groupSql, queue, top, 'busiest');
  }

  private groupSql: string | null = null;

  /** Failed, cancelled or completed jobs (any queue) back to waiting; returns the ids retried. */
  async retryIds(ids: readonly string[]): Promise<string[]> {
    return (await this.db.query<{ id: string }>(this.q.retryIds, [ids, this.channel])).map((r) => r.id);
  }

  /** Every failed job of a queue (of one name, if given) back to waiting; returns how many. */
  async retryFailed(queue: string, name: string | null): Promise<number> {
    let total = 0;
    for (;;) {
      const [r] = await this.db.query<{ n: number }>(this.q.retryFailed, [queue, name, 1000, this.channel]);
      total += r.n;
      if (r.n < 1000) return total;
    }
  }
}
