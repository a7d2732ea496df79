// The queue page's Groups panel (issue 29 point 6): the busiest groups of the queue (jobs added
// with `{ group }`), each with its running and waiting jobs and its oldest waiting job's age,
// from GET api/queues/:queue/groups (one bounded read: lib/db/group-counts.ts). Shown only when
// the queue has grouped jobs; past 10,000 due or running jobs the server counts the first ones
// in claim order, and the panel says so rather than show lower bounds as totals. A group's name
// links to the queue's job list filtered by it (its waiting jobs; the state tabs keep the filter).

import { enc, type QueueGroups as Groups } from '../api';
import { ErrorBox, Link, Section } from '../components';
import { qs } from '../router';
import { duration, num } from '../format';
import { usePoll } from '../poll';

/** The Groups panel of one queue; renders nothing while the queue has no grouped job. */
export function QueueGroups(props: { queue: string }) {
  const polled = usePoll<Groups>(`/queues/${enc(props.queue)}/groups`);
  const g = polled.data;
  if (!g || (g.groups.length === 0 && g.other.groups === 0)) {
    return polled.error ? (
      <Section title="Groups">
        <ErrorBox error={polled.error} />
      </Section>
    ) : null;
  }
  const scanned = num(g.scanned.waiting + g.scanned.active);
  return (
    <Section title="Groups">
      <ErrorBox error={polled.error} />
      <p class="muted" data-testid="groups-scope">
        {g.complete
          ? `The ${num(g.groups.length)} busiest of ${num(g.groups.length + g.other.groups)} group(s), by running + waiting jobs.`
          : `Counted over the first ${scanned} due and running jobs in claim order (the oldest first): ` +
            'figures are at least these, and a group with no job among them is not listed.'}
      </p>
      <table class="grid" data-testid="groups-table">
        <thead>
          <tr>
            <th>Group</th>
            <th class="num">Running</th>
            <th class="num">Waiting</th>
            <th class="num">Oldest waiting</th>
          </tr>
        </thead>
        <tbody>
          {g.groups.map((r) => (
            <tr key={r.group} data-group={r.group}>
              <td class="mono">
                <Link to={`/queues/${enc(props.queue)}${qs({ state: 'waiting', group: r.group })}`}>{r.group}</Link>
              </td>
              <td class={`num${r.active === 0 ? ' zero' : ''}`}>{num(r.active)}</td>
              <td class={`num${r.waiting === 0 ? ' zero' : ''}`}>{num(r.waiting)}</td>
              <td class="num">{r.oldestWaitingAgeMs === null ? '–' : duration(r.oldestWaitingAgeMs)}</td>
            </tr>
          ))}
          {g.other.groups > 0 && (
            <tr data-testid="groups-other">
              <td class="muted">{num(g.other.groups)} other group(s)</td>
              <td class="num">{num(g.other.active)}</td>
              <td class="num">{num(g.other.waiting)}</td>
              <td class="num muted">–</td>
            </tr>
          )}
        </tbody>
      </table>
    </Section>
  );
}
