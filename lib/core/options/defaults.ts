import type { JobFailureLogging } from './types';
import type { ResolvedJobDefaults } from './resolved';

/** Every default in one place. */
export const DEFAULTS = {
  schema: 'pgqueue',
  migrate: true,
  workers: true,
  listen: true,
  pollIntervalMs: 2000,
  leaseMs: 30_000,
  rescueIntervalMs: 5000,
  vacuumAtDeadTuples: 10_000,
  cronCatchUpMs: 3_600_000,
  shutdownTimeoutMs: 10_000,
  connectTimeoutMs: 10_000,
  poolSize: 4,
  maxPayloadBytes: 1_048_576,
  progressIntervalMs: 500,
  maxProgressBytes: 4096,
  jobLogs: { maxLines: 1000, maxLineBytes: 4096, maxBytes: 262_144 },
  asyncCommit: true,
  events: { publish: true },
  preparedStatements: true,
  handleUnhandledRejections: true,
  logJobFailures: 'all' as JobFailureLogging,
  retention: { completedMs: 86_400_000, cancelledMs: 86_400_000 },
  historyPartitionMs: 86_400_000,
  concurrency: 10,
  job: {
    priority: 0,
    attempts: 3,
    backoff: { type: 'exponential', delayMs: 1000, maxDelayMs: 3_600_000, jitter: true },
    timeoutMs: null,
    groupOf: null,
  } satisfies ResolvedJobDefaults,
} as const;
