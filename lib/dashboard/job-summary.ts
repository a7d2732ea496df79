import type { JobAttemptError } from '../core/job';
import type { DashboardJob } from '../core/dashboard-reads';

/** A job in a list: what the table shows, without the payload (a 200-character preview) or stacks. */
export interface JobSummary {
  /** As `Job.id`. */
  readonly id: string;
  /** As `Job.queue`. */
  readonly queue: string;
  /** As `Job.name`. */
  readonly name: string;
  /** As `Job.state`. */
  readonly state: string;
  /** As `Job.priority`. */
  readonly priority: number;
  /** As `Job.attempt`. */
  readonly attempt: number;
  /** As `Job.maxAttempts`. */
  readonly maxAttempts: number;
  /** As `Job.runAt`. */
  readonly runAt: Date;
  /** As `Job.createdAt`. */
  readonly createdAt: Date;
  /** As `Job.startedAt`. */
  readonly startedAt: Date | null;
  /** As `Job.finishedAt`. */
  readonly finishedAt: Date | null;
  /** The `uniqueKey` it was added with, if any. */
  readonly uniqueKey: string | null;
  /** Its group (docs/groups.md), or null. */
  readonly group: string | null;
  /** The node id of the worker that holds it while it runs; else null. */
  readonly lockedBy: string | null;
  /** The payload's JSON, cut to its first 200 characters. */
  readonly payloadPreview: string;
  /** The headline of its latest error (no stack); null when no attempt failed. */
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
    group: j.group,
    lockedBy: j.lockedBy,
    payloadPreview: (JSON.stringify(j.payload) ?? 'null').slice(0, PREVIEW_CHARS),
    lastError: last ? { name: last.name, message: last.message, at: last.at } : null,
  };
}
