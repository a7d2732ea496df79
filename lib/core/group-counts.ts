import { PgQueueConfigError } from './errors';

/** One group's figures in a queue (jobs added with `{ group }`). */
export interface GroupCounts {
  /** The group key the jobs were added with. */
  readonly group: string;
  /** Jobs of the group due now and not yet claimed (as `QueueCounts.waiting`). */
  readonly waiting: number;
  /** Jobs of the group running now (claimed, stalled ones included until the rescuer takes them back). */
  readonly active: number;
  /** How long the group's oldest due, unclaimed job has waited (now - its runAt, database clock); null when none waits. */
  readonly oldestWaitingAgeMs: number | null;
}

/** Which groups `getGroupCounts` lists first: the busiest (active + waiting, most first) or the oldest waiting. */
export type GroupCountsOrder = 'busiest' | 'oldest';

/** Options of `queue.getGroupCounts()` and `QueueService.getGroupCounts()`. */
export interface GroupCountsOptions {
  /** How many groups to list; the rest are summed in `other`. 1 to 1000. @default 20 */
  readonly top?: number;
  /**
   * `'busiest'`: most active + waiting jobs first (ties: oldest waiting first); `'oldest'`: the
   * group whose oldest due job has waited longest first (what a starving group looks like).
   * @default 'busiest'
   */
  readonly orderBy?: GroupCountsOrder;
}

/**
 * A queue's groups, the top ones listed and the rest summed. Counted over at most the first
 * 10,000 due jobs in claim order and 10,000 grouped running ones (GROUP_SCAN_LIMIT, lib/db/group-counts.ts),
 * so the read costs the same at any backlog; `complete` says whether that covered every job.
 */
export interface QueueGroupCounts {
  /** The queue read. */
  readonly queue: string;
  /** The top groups, in the order asked for; empty when no job examined has a group. */
  readonly groups: GroupCounts[];
  /** The groups found beyond the top ones, and their jobs summed. */
  readonly other: { readonly groups: number; readonly waiting: number; readonly active: number };
  /**
   * True when the scans saw every due and every running job of the queue: the figures are exact.
   * False past 10,000 of either: they count the jobs examined (the first due ones in claim order,
   * oldest first within a priority), so they are lower bounds, and a group with no job among them
   * is missing.
   */
  readonly complete: boolean;
  /** How many due jobs (grouped or not) and grouped running jobs the scans examined. */
  readonly scanned: { readonly waiting: number; readonly active: number };
}

/** Defaults of {@link GroupCountsOptions}. */
export const GROUP_COUNTS_DEFAULTS = Object.freeze({ top: 20, orderBy: 'busiest' as GroupCountsOrder });

/** The options with their defaults; a bad one throws `PgQueueConfigError` saying what to pass. */
export function resolveGroupCountsOptions(opts: GroupCountsOptions = {}): Required<GroupCountsOptions> {
  const top = opts.top ?? GROUP_COUNTS_DEFAULTS.top;
  if (!Number.isInteger(top) || top < 1 || top > 1000) {
    throw new PgQueueConfigError(`getGroupCounts: top must be a whole number from 1 to 1000, got ${String(top)}.`);
  }
  const orderBy = opts.orderBy ?? GROUP_COUNTS_DEFAULTS.orderBy;
  if (orderBy !== 'busiest' && orderBy !== 'oldest') {
    throw new PgQueueConfigError(`getGroupCounts: orderBy must be 'busiest' or 'oldest', got ${JSON.stringify(orderBy)}.`);
  }
  return { top, orderBy };
}
