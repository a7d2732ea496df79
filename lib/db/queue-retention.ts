/** How long finished jobs are kept in history, per state (null: failed jobs kept for ever). */
export interface Retention {
  readonly completedMs: number;
  readonly cancelledMs: number;
  readonly failedMs: number | null;
}

/** A queue's own `retention` (registerQueue), each field over the module's. */
export interface RetentionOverride {
  readonly completedMs?: number;
  readonly cancelledMs?: number;
  readonly failedMs?: number;
}

/**
 * One class of the batched retention delete: the queues it covers, and per state the age past
 * which a row goes. `queue`: one queue with its own retention, or null for every other queue
 * (`except` lists the queues with their own). `rowByRow`: deleted a batch at a time over the whole
 * history (a partition drop would keep them too long); `rest`: deleted a batch at a time only
 * where no partition drop ever takes them (the pre-version-10 table and the default partition).
 * A null age deletes nothing of that state there.
 */
export interface PruneClass {
  readonly queue: string | null;
  readonly except: readonly string[];
  readonly rowByRow: { readonly completed: number | null; readonly cancelled: number | null; readonly failed: number | null };
  readonly rest: { readonly completed: number | null; readonly cancelled: number | null };
}

/**
 * The retention of every queue of one database: the module's, and the queues registered with their
 * own. Set at boot (registerQueue), read by the maintenance pass, the partition drops and the
 * completions. Every node of a database should be given the same (as for the module's retention):
 * a node knows only the queues its app registers.
 */
export class QueueRetentions {
  private readonly own = new Map<string, Retention>();

  constructor(readonly base: Retention) {}

  /** Gives `queue` its own retention, each field left out taken from the module's. */
  set(queue: string, o: RetentionOverride): void {
    this.own.set(queue, {
      completedMs: o.completedMs ?? this.base.completedMs,
      cancelledMs: o.cancelledMs ?? this.base.cancelledMs,
      failedMs: o.failedMs ?? this.base.failedMs,
    });
  }

  /** The retention that applies to `queue`. */
  of(queue: string): Retention {
    return this.own.get(queue) ?? this.base;
  }

  /**
   * True when some retention keeps completed jobs: completions then write history (a queue whose
   * completedMs is 0 has its rows deleted by the next maintenance pass); false only when none
   * does, and completions delete the row at once, as before per-queue retention.
   */
  get keepsCompleted(): boolean {
    return this.all().some((r) => r.completedMs > 0);
  }

  /** Partitions of completed and cancelled jobs are dropped once all of them is past every retention. */
  get dropAfterMs(): number {
    return Math.max(...this.all().map((r) => Math.max(r.completedMs, r.cancelledMs)));
  }

  /** The shortest retention of all (flow edges are pruned past it). */
  get shortestMs(): number {
    return Math.min(...this.all().map((r) => Math.min(r.completedMs, r.cancelledMs, r.failedMs ?? Infinity)));
  }

  /** The classes of the batched delete, the module's first (pure: see pruneClasses). */
  plan(partitionMs: number): PruneClass[] {
    return pruneClasses(this.base, this.own, partitionMs);
  }

  private all(): Retention[] {
    return [this.base, ...this.own.values()];
  }
}

/**
 * Which rows the batched delete takes, per class of queues. A partition is dropped once all of it
 * is past the longest retention (`drop`); a row lives in it up to `drop` plus one partition. A
 * state whose retention is shorter than a partition, or shorter than `drop` (another queue, or
 * the other state, keeps partitions longer), would outstay its retention by more than one
 * partition: its rows are deleted a batch at a time. The others go with their partitions, except
 * in the tables no drop takes (`rest`). Completed jobs are kept only when some retention keeps
 * them (`QueueRetentions.keepsCompleted`); when none does there is no history of them to delete.
 */
export function pruneClasses(base: Retention, own: ReadonlyMap<string, Retention>, partitionMs: number): PruneClass[] {
  const all = [base, ...own.values()];
  const drop = Math.max(...all.map((r) => Math.max(r.completedMs, r.cancelledMs)));
  const keepsCompleted = all.some((r) => r.completedMs > 0);
  const short = (ms: number) => ms < partitionMs || ms < drop;
  const classOf = (queue: string | null, r: Retention): PruneClass => {
    const completed = keepsCompleted ? r.completedMs : null;
    return {
      queue,
      except: queue === null ? [...own.keys()] : [],
      rowByRow: {
        completed: completed !== null && short(completed) ? completed : null,
        cancelled: short(r.cancelledMs) ? r.cancelledMs : null,
        failed: r.failedMs,
      },
      rest: {
        completed: completed !== null && !short(completed) ? completed : null,
        cancelled: !short(r.cancelledMs) ? r.cancelledMs : null,
      },
    };
  };
  return [classOf(null, base), ...[...own].map(([q, r]) => classOf(q, r))];
}

/**
 * The batched delete of one class on one table of the history (`table`: the parent, or a table no
 * drop takes). `scope` 'queue': one queue ($5), found on job_history_queue_state_idx (queue, state,
 * id) of each partition the finish-time bound leaves; 'others': every queue but those with their own ($5 text[]).
 * $1 completed ms (NULL: none) $2 batch $3 cancelled ms (NULL: none) $4 failed ms (NULL: none) $5
 */
export function queuePruneSql(table: string, scope: 'queue' | 'others'): string {
  const which = scope === 'queue' ? 'queue = $5::text' : 'queue <> ALL($5::text[])';
  return `
      DELETE FROM ${table} WHERE id IN (
        SELECT id FROM ${table}
        WHERE ${which}
          AND ((state = 'completed' AND finished_at < now() - $1::bigint::float8 * interval '1 millisecond')
            OR (state = 'cancelled' AND finished_at < now() - $3::bigint::float8 * interval '1 millisecond')
            OR (state = 'failed' AND finished_at < now() - $4::bigint::float8 * interval '1 millisecond'))
        LIMIT $2)`;
}
