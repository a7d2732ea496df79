import type { ResolvedSchedule } from '../core/cron-schedule';
import type { ResolvedJobDefaults } from '../core/options/resolved';
import type { JobSchedulers, SchedulerRow } from '../db/job-schedulers';
import { buildSchedulerRow } from './scheduler-row';

/** What a boot reconciled in one database: the code-declared schedulers upserted and removed. */
export interface ReconcileReport {
  readonly upserted: number;
  readonly removed: readonly { queue: string; id: string }[];
  /** Those first stored now, whose next tick follows the last tick of migration 6's cron_schedules. */
  readonly fromLegacy: number;
}

/**
 * Makes the code-declared schedules (`@Process({ cron })`, `registerQueue({ repeat })`) of one
 * database its job_schedulers rows (source 'code', id = the job name), at boot:
 * - each declared one is upserted: the same timing keeps its next tick (a restart neither
 *   reruns nor skips one), a changed timing starts from its first tick from now;
 * - one stored before this version in cron_schedules (migration 6) gets, the first time, the tick
 *   after its last_tick as next tick, so the upgrade neither reruns nor skips one: the ticks
 *   missed meanwhile are caught up as `cronCatchUpMs` says;
 * - a code row of a queue in `ownedQueues` that this app no longer declares is removed. Only
 *   those queues: another app of the same database (an API without workers, a second service)
 *   declares its own, and removing them would be wrong. So `ownedQueues` is the queues this
 *   app runs workers for, where its `@Process` handlers are: the app that handles a job owns its schedule.
 */
export async function reconcileCodeSchedulers(
  schedulers: JobSchedulers,
  declared: readonly ResolvedSchedule[],
  ownedQueues: readonly string[],
  defaultsOf: (queue: string) => ResolvedJobDefaults,
  maxPayloadBytes: number,
  now = new Date(),
): Promise<ReconcileReport> {
  const keys = declared.map((s) => ({ queue: s.queue, id: s.name }));
  const stored = declared.length ? await schedulers.existing(keys) : new Set<string>();
  const fresh = declared.filter((s) => !stored.has(`${s.queue}/${s.name}`));
  const legacy = fresh.length ? await schedulers.legacyLastTicks(fresh.map((s) => s.key)) : new Map<string, Date>();
  let fromLegacy = 0;
  for (const s of declared) {
    const row: SchedulerRow = buildSchedulerRow(
      s.queue,
      s.name,
      { pattern: s.cron, tz: s.tz },
      { name: s.name, payload: s.payload },
      defaultsOf(s.queue),
      maxPayloadBytes,
      'code',
      now,
    );
    const last = stored.has(`${s.queue}/${s.name}`) ? undefined : legacy.get(s.key);
    if (last) {
      row.firstRunAt = s.next(last);
      fromLegacy++;
    }
    await schedulers.upsert(row);
  }
  const removed = ownedQueues.length ? await schedulers.removeUndeclared(ownedQueues, keys) : [];
  return { upserted: declared.length, removed, fromLegacy };
}
