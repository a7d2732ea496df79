import type { JobAttemptError } from '../core/job';
import type { DashboardJob } from '../core/dashboard-reads';

/** A job in a list: what the table shows, without the payload (a 200-character preview) or stacks. */
export interface JobSummary {
  readonly id: string;
  readonly queue: string;
  readonly name: string;
  readonly state: string;
  readonly priority: number;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly runAt: Date;
  readonly createdAt: Date;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  readonly uniqueKey: string | null;
  readonly lockedBy: string | null;
  readonly payloadPreview: string;
  readonly lastError: { readonly name: string; readonly message: string; readonly at: string } | null;
}

const PREVIEW_CHARS = 200;

/** A listed job's summary: the table's columns, a payload preview and the last error's headline. */
export function summary(j: DashboardJob): JobSummary {
  const last: JobAttemptError | undefined = j.errors[j.errors.length - 1];
  return {
    id: j.id,
    queue: j.queue,
    name: j.name,
    state: j.state,
    priority: j.priority,
    attempt: j.attempt,
    maxAttempts: j.maxAttempts,
    runAt: j.runAt,
    createdAt: j.createdAt,
    startedAt: j.startedAt,
    finishedAt: j.finishedAt,
    uniqueKey: j.uniqueKey,
    lockedBy: j.lockedBy,
    payloadPreview: (JSON.stringify(j.payload) ?? 'null').slice(0, PREVIEW_CHARS),
    lastError: last ? { name: last.name, message: last.message, at: last.at } : null,
  };
}
