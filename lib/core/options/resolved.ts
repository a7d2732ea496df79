import type { ResolvedSchedule } from '../cron-schedule';
import type { JobFailureLogging } from './types';

// What internal code sees: options validated once at boot, every default filled in
// (./module-checks.ts and ./job-checks.ts build these).

export interface ResolvedBackoff {
  readonly type: 'fixed' | 'exponential';
  readonly delayMs: number;
  readonly maxDelayMs: number;
  readonly jitter: boolean;
}

export interface ResolvedJobDefaults {
  readonly priority: number;
  readonly attempts: number;
  readonly backoff: ResolvedBackoff;
  readonly timeoutMs: number | null;
  /** `registerQueue({ defaultJobOptions: { group } })`: a job's group from its payload; null: none. */
  readonly groupOf: ((payload: unknown) => unknown) | null;
}

export interface ResolvedPgQueueOptions {
  readonly schema: string;
  readonly migrate: boolean;
  /** The role that must own the schema; null: this role or one it is a member of; false: not checked. */
  readonly schemaOwner: string | false | null;
  readonly workers: boolean;
  readonly listen: boolean;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly heartbeatIntervalMs: number;
  readonly rescueIntervalMs: number;
  readonly vacuumAtDeadTuples: number;
  readonly cronCatchUpMs: number;
  readonly shutdownTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly poolSize: number;
  readonly maxPayloadBytes: number;
  readonly progressIntervalMs: number;
  readonly maxProgressBytes: number;
  /** job.log(): the caps of one job's log (lines kept, bytes of one line, bytes of all). */
  readonly jobLogs: { readonly maxLines: number; readonly maxLineBytes: number; readonly maxBytes: number };
  readonly asyncCommit: boolean;
  readonly preparedStatements: boolean;
  /** Whether outcome statements publish cross-process events. */
  readonly events: { readonly publish: boolean };
  readonly handleUnhandledRejections: boolean;
  readonly logJobFailures: JobFailureLogging;
  readonly retention: { readonly completedMs: number; readonly cancelledMs: number; readonly failedMs: number | null };
  readonly historyPartitionMs: number;
  readonly defaultJobOptions: ResolvedJobDefaults;
}

export interface ResolvedQueueOptions {
  readonly name: string;
  readonly concurrency: number;
  readonly defaultJobOptions: ResolvedJobDefaults;
  readonly deadLetterQueue: string | null;
  readonly globalConcurrency: number | null;
  readonly limiter: { readonly max: number; readonly durationMs: number } | null;
  /** registerQueue({ group }): per-group limits and fair turns (docs/groups.md); null: not a grouped queue. */
  readonly group: ResolvedGroupOptions | null;
  readonly repeat: readonly ResolvedSchedule[];
  /** The named connection whose database holds the queue. */
  readonly connection: string;
  /** Its own retention (the fields given), over the module's; null: the module's. */
  readonly retention: { readonly completedMs?: number; readonly cancelledMs?: number; readonly failedMs?: number } | null;
}

/** A grouped queue's settings (registerQueue({ group })). */
export interface ResolvedGroupOptions {
  /** Running jobs per group at most, across every node (null: no limit unless stored per group). */
  readonly concurrency: number | null;
  /** order 'fifo': one running job per group, its oldest next. */
  readonly fifo: boolean;
  readonly limiter: { readonly max: number; readonly durationMs: number } | null;
}
