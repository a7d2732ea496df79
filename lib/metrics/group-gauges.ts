import { Gauge, type Registry } from 'prom-client';
import type { QueueGroupCounts } from '../core/group-counts';

/**
 * The `group` label of the series that sums every group beyond a queue's top ones. Not a group
 * key anyone would choose; a group really named so would share the series.
 */
export const OTHER_GROUPS = '__other__';

/** What the group gauges read at scrape time: each queue's top groups, or null when they could not be read. */
export type GroupCountsSource = () => Promise<QueueGroupCounts[] | null> | undefined;

/**
 * `group_jobs{queue, group, state}` (state: waiting, active) and
 * `group_oldest_waiting_seconds{queue, group}`: each queue's top groups as the source lists them,
 * plus one `__other__` series for the rest in `group_jobs`, so a queue of 1,000 tenants has at
 * most top + 1 groups in the scrape. Both gauges collect in the same scrape; `read` is expected to
 * share one read between them (sharedInFlight). `reuse` finds or makes each gauge in `registry`.
 */
export function registerGroupGauges(
  registry: Registry,
  prefix: string,
  read: GroupCountsSource,
  reuse: <M>(name: string, kind: abstract new (...args: never[]) => M, create: () => M) => M,
): void {
  const registers = [registry];
  reuse(
    `${prefix}group_jobs`,
    Gauge,
    () =>
      new Gauge<'queue' | 'group' | 'state'>({
        name: `${prefix}group_jobs`,
        help:
          `Jobs per group of each queue's busiest groups (active + waiting), state waiting or active, the rest summed as group="${OTHER_GROUPS}"; ` +
          'read at scrape time over at most the first 10,000 due and 10,000 grouped running jobs of each queue.',
        labelNames: ['queue', 'group', 'state'],
        registers,
        async collect() {
          const all = await read();
          this.reset();
          for (const q of all ?? []) {
            for (const g of q.groups) {
              this.set({ queue: q.queue, group: g.group, state: 'waiting' }, g.waiting);
              this.set({ queue: q.queue, group: g.group, state: 'active' }, g.active);
            }
            if (q.other.groups > 0) {
              this.set({ queue: q.queue, group: OTHER_GROUPS, state: 'waiting' }, q.other.waiting);
              this.set({ queue: q.queue, group: OTHER_GROUPS, state: 'active' }, q.other.active);
            }
          }
        },
      }),
  );
  reuse(
    `${prefix}group_oldest_waiting_seconds`,
    Gauge,
    () =>
      new Gauge<'queue' | 'group'>({
        name: `${prefix}group_oldest_waiting_seconds`,
        help: "Age of the oldest due, unclaimed job of each of a queue's busiest groups; 0 when none of the group waits.",
        labelNames: ['queue', 'group'],
        registers,
        async collect() {
          const all = await read();
          this.reset();
          for (const q of all ?? []) {
            for (const g of q.groups) this.set({ queue: q.queue, group: g.group }, (g.oldestWaitingAgeMs ?? 0) / 1000);
          }
        },
      }),
  );
}
