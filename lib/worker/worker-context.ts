import type { JobStore } from '../db/job-store';
import type { SqlExecutor } from '../db/executor';
import type { Job, JobProgress } from '../core/job';
import type { BatchHandlerEntry } from '../core/batch';
import type { Completer } from './completer';
import type { LogBufferCaps } from './job-logs';
import type { EngineLogger } from './logger';
import type { AppTransaction } from './steps';

/**
 * What a worker tells the supervisor as jobs move. The other transitions are reported by the
 * completer, once their outcome is written.
 */
export interface WorkerEvents {
  active(job: Job): void;
  /** The handler completed its job with `completeWith()`, in its own transaction. */
  completed(job: Job, result: unknown): void;
  /** The handler called `job.updateProgress(value)` (fires on every call; writes are throttled). */
  progress(job: Job, value: JobProgress): void;
  error(err: Error): void;
}

export interface QueueWorkerContext {
  readonly store: JobStore;
  readonly completer: Completer;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly pollIntervalMs: number;
  /** job.updateProgress(): one write per job per this many ms, values up to maxProgressBytes. */
  readonly progressIntervalMs: number;
  readonly maxProgressBytes: number;
  /** job.log(): the caps of one job's log; lines are written at most once per progressIntervalMs. */
  readonly jobLogs: LogBufferCaps;
  readonly logger: EngineLogger;
  readonly events: WorkerEvents;
  /** Checks a `completeWith()` transaction is on this queue's database (an app with more than one). */
  readonly onOwnDatabase?: (exec: SqlExecutor) => SqlExecutor;
  /** The app's DataSource transaction (its connection comes from a DataSource): `{ manager }` steps (steps.ts). */
  readonly appTransaction?: AppTransaction;
  /** The queue's `@Process({ name, batch })` handlers, by job name (batch-runner.ts). */
  readonly batches?: ReadonlyMap<string, BatchHandlerEntry>;
}
