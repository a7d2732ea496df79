import { enc, type Schedule } from '../api';
import { Empty, ErrorBox, Link, Loading, Section, Time } from '../components';
import { absolute } from '../format';
import { usePoll } from '../poll';

/** The docs page on recurring jobs (the README no longer holds that section). */
const RECURRING_DOCS = 'https://github.com/nestjs-pg-queue/nestjs-pg-queue/blob/main/docs/recurring-jobs.md';

export function SchedulesPage() {
  const { data, error } = usePoll<{ schedules: Schedule[] }>('/schedules');
  if (!data) return error ? <ErrorBox error={error} /> : <Loading />;
  return (
    <>
      <ErrorBox error={error} title="Refresh failed; showing the last answer" />
      <Section title="Recurring jobs">
        {data.schedules.length === 0 ? (
          <Empty>
            No recurring jobs. Declare one with <code>{'@Process({ name, cron, tz })'}</code> (see{' '}
            <a href={RECURRING_DOCS} target="_blank" rel="noreferrer">
              Recurring jobs
            </a>{' '}
            in the docs).
          </Empty>
        ) : (
          <table class="grid" data-testid="schedules-table">
            <thead>
              <tr>
                <th>Queue</th>
                <th>Job name</th>
                <th>Expression</th>
                <th>Time zone</th>
                <th>Last tick</th>
                <th>Next runs</th>
              </tr>
            </thead>
            <tbody>
              {data.schedules.map((s) => (
                <tr key={`${s.queue}/${s.name}`}>
                  <td>
                    <Link to={`/queues/${enc(s.queue)}`}>{s.queue}</Link>
                  </td>
                  <td class="mono">{s.name}</td>
                  <td class="mono">
                    {s.cron ?? (
                      <span class="muted" title="ticked by another app or an earlier version of this one">
                        not declared here
                      </span>
                    )}
                  </td>
                  <td>{s.tz ?? <span class="muted">server (UTC)</span>}</td>
                  <td>
                    <Time iso={s.lastTick} />
                  </td>
                  <td>
                    {s.next.length === 0 ? (
                      <span class="muted">none</span>
                    ) : (
                      <ul class="next-runs">
                        {s.next.map((n) => (
                          <li key={n}>
                            <Time iso={n} /> <span class="abs">{absolute(n)}</span>
                          </li>
                        ))}
                      </ul>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </>
  );
}
