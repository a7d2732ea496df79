import { useState } from 'preact/hooks';
import { enc, post, type Schedule } from '../api';
import { ActionButton, Empty, ErrorBox, Link, Loading, Notice, Section, Time, type ActionResult } from '../components';
import { absolute, duration } from '../format';
import { usePoll } from '../poll';
import { settings } from '../settings';

/** The docs page on recurring jobs (the README no longer holds that section). */
const RECURRING_DOCS = 'https://github.com/nestjs-pg-queue/nestjs-pg-queue/blob/main/docs/recurring-jobs.md';

/** One scheduler's buttons: pause or resume, run now, remove (each a POST the access rules check). */
function SchedulerActions(props: { s: Schedule; onDone: (r: ActionResult) => void }) {
  const { s, onDone } = props;
  const base = `/queues/${enc(s.queue)}/schedulers/${enc(s.id)}`;
  const label = `${s.queue}/${s.id}`;
  return (
    <span class="row-actions">
      {s.paused ? (
        <ActionButton
          label="Resume"
          testId="scheduler-resume"
          run={async () => {
            await post(`${base}/resume`, {});
            return `Scheduler ${label} resumed: ticks that passed while paused are skipped`;
          }}
          onDone={onDone}
        />
      ) : (
        <ActionButton
          label="Pause"
          testId="scheduler-pause"
          run={async () => {
            await post(`${base}/pause`, {});
            return `Scheduler ${label} paused`;
          }}
          onDone={onDone}
        />
      )}
      <ActionButton
        label="Run now"
        testId="scheduler-run"
        run={async () => {
          const r = await post<{ jobId?: string }>(`${base}/run`, {});
          return `Scheduler ${label}: job ${r.jobId ?? ''} enqueued now; the schedule is unchanged`;
        }}
        onDone={onDone}
      />
      <ActionButton
        label="Remove"
        kind="danger"
        confirm={
          s.source === 'code' ? `Remove ${label}? It is declared in code: the next boot adds it back.` : `Remove ${label}?`
        }
        testId="scheduler-remove"
        run={async () => {
          await post(`${base}/remove`, {});
          return `Scheduler ${label} removed`;
        }}
        onDone={onDone}
      />
    </span>
  );
}

export function SchedulesPage() {
  const { data, error, reload } = usePoll<{ schedules: Schedule[] }>('/schedules');
  const [notice, setNotice] = useState<ActionResult | null>(null);
  const done = (r: ActionResult): void => {
    setNotice(r);
    void reload();
  };
  if (!data) return error ? <ErrorBox error={error} /> : <Loading />;
  const actions = !settings.readOnly;
  return (
    <>
      <ErrorBox error={error} title="Refresh failed; showing the last answer" />
      <Notice result={notice} onClose={() => setNotice(null)} />
      <Section title="Recurring jobs">
        {data.schedules.length === 0 ? (
          <Empty>
            No recurring jobs. Declare one with <code>{'@Process({ name, cron, tz })'}</code> or add one at run time with{' '}
            <code>{'queue.upsertJobScheduler(id, { pattern }, { name })'}</code> (see{' '}
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
                <th>Scheduler</th>
                <th>Job name</th>
                <th>Every</th>
                <th>Time zone</th>
                <th>Jobs made</th>
                <th>Next runs</th>
                {actions && <th />}
              </tr>
            </thead>
            <tbody>
              {data.schedules.map((s) => (
                <tr key={`${s.connection ?? ''}/${s.queue}/${s.id}`} data-testid="scheduler-row">
                  <td>
                    <Link to={`/queues/${enc(s.queue)}`}>{s.queue}</Link>
                  </td>
                  <td class="mono">
                    {s.id}{' '}
                    {s.source === 'code' && (
                      <span class="badge code" title="declared in code, reconciled at boot">
                        code
                      </span>
                    )}{' '}
                    {s.paused && <span class="badge paused">paused</span>}
                  </td>
                  <td class="mono">{s.name}</td>
                  <td class="mono">{s.cron ?? (s.every !== null ? duration(s.every) : '')}</td>
                  <td>{s.cron ? s.tz : <span class="muted">n/a</span>}</td>
                  <td>
                    {s.iterationCount}
                    {s.limit !== null && <span class="muted"> / {s.limit}</span>}
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
                  {actions && (
                    <td>
                      <SchedulerActions s={s} onDone={done} />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </>
  );
}
