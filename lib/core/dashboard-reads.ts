import { PgQueueError } from './errors';
import type { QueueGroupCounts } from './group-counts';
import type { Job } from './job';
import type { JobLogsPage } from './job-logs';
import type { RecordedJobSteps } from './steps';

// What the dashboard reads, in core types only: lib/module builds the store behind DashboardReads
// (lib/module/dashboard-reads.ts, over lib/db/dashboard-store.ts) and hands it to lib/dashboard,
// which imports neither db/ nor worker/ (eslint.config.mjs, MAY_IMPORT). DashboardStore
// implements DashboardReads, so the compiler keeps this view true to the class behind it.

/** The states the dashboard lists; `waiting` means due now, `delayed` waiting for a later runAt. */
export type ListState = 'waiting' | 'delayed' | 'active' | 'waiting-children' | 'completed' | 'failed' | 'cancelled';

/** Filters of a job list; every value travels as a bind parameter. */
export interface ListFilters {
  readonly name?: string;
  /** Live states only: history does not keep unique keys. */
  readonly uniqueKey?: string;
  /** JSON text; matched with `payload @> $n::jsonb`. */
  readonly payloadJson?: string;
  /** A job's group (docs/groups.md), exactly. */
  readonly group?: string;
}

/**
 * Where a page starts (exclusive): the last job of the previous page, in the list's own order.
 * Waiting and delayed jobs are listed in claim order (priority, run_at, id), so their key holds
 * all three (run_at as UTC text with microseconds: a JS Date would drop them); the others are
 * listed newest first by id.
 */
export type ListKey = { readonly id: string } | { readonly priority: number; readonly runAt: string; readonly id: string };

/** One queue's figures on the overview. */
export interface QueueOverviewRow {
  readonly name: string;
  readonly waiting: number;
  readonly delayed: number;
  readonly active: number;
  readonly stalled: number;
  readonly failed: number;
  readonly cancelled: number;
  readonly waitingChildren: number;
  /** Parked by job.sleep() (not in delayed). */
  readonly sleeping: number;
  /** Parked by job.waitFor() (not in delayed). */
  readonly waitingSignal: number;
  readonly paused: boolean;
  readonly oldestWaitingAgeMs: number | null;
}

/** Completed and failed jobs per minute, oldest minute first. */
export interface Throughput {
  readonly minutes: string[];
  readonly completed: number[];
  readonly failed: number[];
  readonly now: Date;
}

/** A job with what the dashboard shows beyond Job. */
export type DashboardJob = Job & {
  readonly uniqueKey: string | null;
  readonly lockedBy: string | null;
  readonly history: boolean;
  /** The trace the job belongs to (from the W3C traceparent recorded at enqueue), on the job page only. */
  readonly traceId?: string | null;
};

/** A job linked to another in a flow, as its page lists it. */
export interface FlowLink {
  readonly id: string;
  /** null when the job is gone (pruned or removed). */
  readonly queue: string | null;
  readonly name: string | null;
  readonly state: string | null;
}

/** A job's parents and children, for its page. */
export interface DashboardFlow {
  readonly parents: FlowLink[];
  /** The first 100 children by id. */
  readonly children: FlowLink[];
  readonly childrenTotal: number;
  /** Children not finished yet. */
  readonly childrenPending: number;
}

/** A live node of the registry. */
export interface NodeInfo {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: Date;
  readonly lastSeenAt: Date;
  readonly heartbeatMs: number;
  readonly queues: { name: string; concurrency: number }[];
  /** Jobs this node holds active now. */
  readonly running: number;
}

/**
 * A dashboard read that the database was not asked to run, or was made to stop: too many
 * statements waiting their turn (MAX_WAITING, lib/db/dashboard/executor.ts), or one past its
 * `statement_timeout`. The dashboard answers
 * 503: a page polls again, an operator sees the read was too costly rather than a 500.
 */
export class DashboardBusyError extends PgQueueError {}

/** One database's dashboard reads (and the writes the engine has none for); see DashboardStore. */
export interface DashboardReads {
  /** Figures per queue: all of them (and every registered one), or one. */
  counts(registered: readonly string[], queue?: string | null): Promise<QueueOverviewRow[]>;
  /** Per minute over the last hour; minutes before `from` (if given) come back as 0. */
  throughput(from?: Date | null): Promise<Throughput>;
  /** A queue's job names (its name filter's choices). */
  names(queue: string): Promise<string[]>;
  /** One page of a queue's jobs in a state; `next` is where the following page starts, or null at the end. */
  listJobs(
    queue: string,
    state: ListState,
    filters: ListFilters,
    cursor: ListKey | null,
    limit: number,
  ): Promise<{ jobs: (DashboardJob & { runAtKey: string })[]; next: ListKey | null }>;
  /** One job, live or finished, or null. */
  job(id: string): Promise<DashboardJob | null>;
  /** A job's place in a flow, or null for a job in no flow. */
  flow(id: string): Promise<DashboardFlow | null>;
  /** Lines `offset + 1` to `offset + limit` of a job's log (job.log()), or null when there is no such job. */
  jobLogs(id: string, offset: number, limit: number): Promise<JobLogsPage | null>;
  /** A job's durable steps (job.step, sleep, waitFor), oldest first, and the database's clock. */
  jobSteps(id: string): Promise<RecordedJobSteps>;
  /** The queue and state of each id found (live or finished). */
  locate(ids: readonly string[]): Promise<{ id: string; queue: string; state: string }[]>;
  nodes(): Promise<NodeInfo[]>;
  /** The job schedulers of every queue (code-declared and runtime), by queue and id, at most a capped number. */
  schedulers(): Promise<DashboardScheduler[]>;
  /**
   * How many jobs of a queue are in `state` (of one name, if given; for a finished state, finished
   * more than `olderThanMs` ago, if given), counting at most `cap`.
   */
  countMatching(queue: string, state: ListState, name: string | null, olderThanMs: number | null, cap: number): Promise<number>;
  /** A queue's busiest groups, the first `top` by active + waiting (lib/db/group-counts.ts: bounded scans). */
  groups(queue: string, top: number): Promise<QueueGroupCounts>;
  /** Failed, cancelled or completed jobs (any queue) back to waiting; returns the ids retried. */
  retryIds(ids: readonly string[]): Promise<string[]>;
  /** Every failed job of a queue (of one name, if given) back to waiting; returns how many. */
  retryFailed(queue: string, name: string | null): Promise<number>;
}

/** A job scheduler as the dashboard lists it (lib/db/job-schedulers.ts holds the same rows). */
export interface DashboardScheduler {
  readonly queue: string;
  readonly id: string;
  /** The name of the jobs it enqueues. */
  readonly name: string;
  readonly pattern: string | null;
  readonly everyMs: number | null;
  readonly tz: string;
  readonly next: Date | null;
  readonly paused: boolean;
  readonly source: 'code' | 'runtime';
  /** Jobs it has enqueued. */
  readonly count: number;
  readonly limit: number | null;
  readonly endAt: Date | null;
}
