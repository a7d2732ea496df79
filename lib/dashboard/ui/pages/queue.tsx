import { useEffect, useState } from 'preact/hooks';
import { JOB_STATES, enc, onConnection, post, type JobPage, type JobState, type JobSummary, type QueueDetail } from '../api';
import {
  ActionButton,
  Empty,
  ErrorBox,
  Link,
  Loading,
  Notice,
  Section,
  StateBadge,
  Time,
  type ActionResult,
} from '../components';
import { duration, num } from '../format';
import { usePoll } from '../poll';
import { qs } from '../router';
import { settings } from '../settings';
import { EnqueueForm } from './enqueue';
import { QueueConcurrency } from './queue-concurrency';
import { QueueGroups } from './queue-groups';
import { Filters, filtersOf, pageUrl } from './queue-filters';
import { Settings } from './queue-settings';
import { CleanByAge, DrainAction, MatchingActions } from './queue-operations';

/** The time worth showing for a job in its state. */
function when(j: JobSummary) {
  if (j.state === 'completed' || j.state === 'failed' || j.state === 'cancelled') return <Time iso={j.finishedAt} />;
  if (j.state === 'active') return <Time iso={j.startedAt} />;
  return <Time iso={j.runAt} />;
}
const WHEN_LABEL: Record<JobState, string> = {
  waiting: 'Due',
  delayed: 'Due',
  active: 'Started',
  'waiting-children': 'Due',
  completed: 'Finished',
  failed: 'Finished',
  cancelled: 'Finished',
};

/**
 * The selection's actions each tab can act on, as the server does: retry takes failed,
 * cancelled and completed jobs, cancel live ones, remove any but a running one. A button that would answer
 * "0 of n" on every job of its tab is not shown.
 */
const TAB_ACTIONS: Record<JobState, { retry: boolean; cancel: boolean; remove: boolean }> = {
  waiting: { retry: false, cancel: true, remove: true },
  delayed: { retry: false, cancel: true, remove: true },
  active: { retry: false, cancel: true, remove: false },
  'waiting-children': { retry: false, cancel: true, remove: true },
  completed: { retry: true, cancel: false, remove: true },
  failed: { retry: true, cancel: false, remove: true },
  cancelled: { retry: true, cancel: false, remove: true },
};

export function QueuePage(props: { queue: string; query: URLSearchParams }) {
  const f = filtersOf(props.query);
  const qname = props.queue;
  const detail = usePoll<QueueDetail>(`/queues/${enc(qname)}`);
  const jobsPath =
    `/queues/${enc(qname)}/jobs` +
    qs({
      state: f.state,
      name: f.name,
      uniqueKey: f.uniqueKey,
      payload: f.payload,
      group: f.group,
      before: f.before,
      limit: '50',
    });
  const jobs = usePoll<JobPage>(jobsPath);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [notice, setNotice] = useState<ActionResult | null>(null);

  // A new page of jobs (state, filter, cursor) starts with nothing selected.
  useEffect(() => setSelected(new Set()), [jobsPath]);

  const done = (r: ActionResult): void => {
    setNotice(r);
    void detail.reload();
    void jobs.reload();
  };

  if (!detail.data) {
    return detail.error ? (
      <>
        <h1 class="page-title">Queue {qname}</h1>
        <ErrorBox error={detail.error} />
      </>
    ) : (
      <Loading />
    );
  }
  const d = detail.data;
  const counts = d.counts;
  const rows = jobs.data?.jobs ?? [];
  const ids = [...selected];
  const actions = !settings.readOnly;
  const tabActs = TAB_ACTIONS[f.state];
  // Parked jobs (job.sleep, job.waitFor) are counted apart, and listed under delayed (their rows are).
  const sleeping = counts.sleeping ?? 0;
  const waitingSignal = counts['waiting-signal'] ?? 0;
  const tabCount = (s: JobState) =>
    s === 'delayed' && counts.delayed != null ? counts.delayed + sleeping + waitingSignal : counts[s];

  return (
    <>
      <div class="page-head">
        <h1 class="page-title">
          <span class="muted">Queue</span> {d.name}{' '}
          {d.paused ? <span class="badge paused">paused</span> : <span class="badge running">running</span>}
        </h1>
        {actions && (
          <div class="page-actions">
            {d.paused ? (
              <ActionButton
                label="Resume"
                kind="primary"
                testId="resume"
                run={async () => {
                  await post(`/queues/${enc(qname)}/resume`, {});
                  return `Queue ${qname} resumed`;
                }}
                onDone={done}
              />
            ) : (
              <ActionButton
                label="Pause"
                testId="pause"
                run={async () => {
                  await post(`/queues/${enc(qname)}/pause`, {});
                  return `Queue ${qname} paused: no worker claims its jobs until it is resumed`;
                }}
                onDone={done}
              />
            )}
            <ActionButton
              label={f.name ? `Retry all failed “${f.name}”` : 'Retry all failed'}
              confirm={f.name ? `Retry every failed “${f.name}”?` : `Retry all ${num(counts.failed ?? 0)} failed?`}
              disabled={!counts.failed}
              testId="retry-all-failed"
              run={async () => {
                const r = await post<{ retried: number }>(`/queues/${enc(qname)}/retry-failed`, f.name ? { name: f.name } : {});
                return `${num(r.retried)} failed job(s) back to waiting`;
              }}
              onDone={done}
            />
            <DrainAction queue={qname} onDone={done} />
          </div>
        )}
      </div>
      <Notice result={notice} onClose={() => setNotice(null)} />
      <ErrorBox error={detail.error} title="Refresh failed; showing the last answer" />

      <nav class="tabs" aria-label="Job states">
        {JOB_STATES.map((s) => (
          <Link key={s} to={pageUrl(qname, { ...f, state: s, before: '' })} class={`tab${s === f.state ? ' current' : ''}`}>
            <span class={`dot state-${s}`} />
            {s}
            <span class="tab-count">{tabCount(s) == null ? '' : num(tabCount(s)!)}</span>
          </Link>
        ))}
        {(counts.stalled ?? 0) > 0 && <span class="tag warn">{num(counts.stalled)} stalled</span>}
        {sleeping + waitingSignal > 0 && (
          <span class="muted tab-aside" data-testid="parked" title="Parked by job.sleep() or job.waitFor(): no worker holds them">
            delayed includes {num(sleeping)} sleeping, {num(waitingSignal)} waiting for a signal
          </span>
        )}
        {counts.oldestWaitingAgeMs != null && (
          <span class="muted tab-aside">oldest waiting {duration(counts.oldestWaitingAgeMs)}</span>
        )}
      </nav>

      <Filters queue={qname} f={f} names={d.names} connection={d.connection} />
      {actions && !f.group && <MatchingActions queue={qname} state={f.state} name={f.name} onDone={done} />}

      <Section
        title={
          <>
            <span class="cap">{f.state}</span> jobs{f.name && <span class="muted"> named {f.name}</span>}
            {f.group && (
              <span class="muted" data-testid="group-filter">
                {' '}
                of group {f.group}
              </span>
            )}
            {f.before && <span class="muted"> · older page</span>}
          </>
        }
        actions={
          actions &&
          rows.length > 0 && (
            <div class="selection" data-testid="selection-actions">
              <span class="muted">{ids.length ? `${ids.length} selected` : 'select jobs to act on them'}</span>
              {tabActs.retry && (
                <ActionButton
                  label="Retry"
                  disabled={!ids.length}
                  testId="retry-selected"
                  run={async () => {
                    const r = await post<{ retried: string[] }>('/jobs/retry', { ids, ...onConnection(detail.data?.connection) });
                    return `Retried ${r.retried.length} of ${ids.length}`;
                  }}
                  onDone={done}
                />
              )}
              {f.state === 'delayed' && (
                <ActionButton
                  label="Promote"
                  disabled={!ids.length}
                  testId="promote-selected"
                  run={async () => {
                    const r = await post<{ promoted: string[] }>('/jobs/promote', {
                      ids,
                      ...onConnection(detail.data?.connection),
                    });
                    return `Promoted ${r.promoted.length} of ${ids.length}: due now`;
                  }}
                  onDone={done}
                />
              )}
              {tabActs.cancel && (
                <ActionButton
                  label="Cancel"
                  disabled={!ids.length}
                  testId="cancel-selected"
                  run={async () => {
                    const r = await post<{ cancelled: string[]; cancelling: string[] }>('/jobs/cancel', {
                      ids,
                      ...onConnection(detail.data?.connection),
                    });
                    return `Cancelled ${r.cancelled.length}, cancelling ${r.cancelling.length} running, of ${ids.length}`;
                  }}
                  onDone={done}
                />
              )}
              {tabActs.remove && (
                <ActionButton
                  label="Remove"
                  kind="danger"
                  disabled={!ids.length}
                  confirm={`Remove ${ids.length}?`}
                  testId="remove-selected"
                  run={async () => {
                    const r = await post<{ removed: string[] }>('/jobs/remove', {
                      ids,
                      ...onConnection(detail.data?.connection),
                    });
                    return `Removed ${r.removed.length} of ${ids.length}`;
                  }}
                  onDone={done}
                />
              )}
            </div>
          )
        }
      >
        <ErrorBox error={jobs.error} />
        {!jobs.data && !jobs.error ? (
          <Loading />
        ) : rows.length === 0 ? (
          jobs.data && (
            <Empty>
              No <span class="cap">{f.state}</span> jobs
              {f.name || f.uniqueKey || f.payload || f.group ? ' match these filters' : ' in this queue'}
              {f.before ? ' on this page.' : '.'}
            </Empty>
          )
        ) : (
          <table class={`grid jobs${jobs.stale ? ' stale' : ''}`} data-testid="jobs-table">
            <thead>
              <tr>
                {actions && (
                  <th class="check">
                    <input
                      type="checkbox"
                      aria-label="select all on this page"
                      checked={rows.length > 0 && rows.every((j) => selected.has(j.id))}
                      onChange={(e) =>
                        setSelected((e.currentTarget as HTMLInputElement).checked ? new Set(rows.map((j) => j.id)) : new Set())
                      }
                    />
                  </th>
                )}
                <th class="num">Id</th>
                <th>Name</th>
                <th>State</th>
                <th class="num">Attempt</th>
                <th>Created</th>
                <th>{WHEN_LABEL[f.state]}</th>
                <th>Payload</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((j) => (
                <tr key={j.id} data-job-id={j.id} class={selected.has(j.id) ? 'selected' : ''}>
                  {actions && (
                    <td class="check">
                      <input
                        type="checkbox"
                        aria-label={`select job ${j.id}`}
                        checked={selected.has(j.id)}
                        onChange={(e) => {
                          const on = (e.currentTarget as HTMLInputElement).checked;
                          setSelected((s) => {
                            const n = new Set(s);
                            if (on) n.add(j.id);
                            else n.delete(j.id);
                            return n;
                          });
                        }}
                      />
                    </td>
                  )}
                  <td class="num mono">
                    <Link to={`/jobs/${enc(j.id)}${qs(onConnection(detail.data?.connection))}`}>{j.id}</Link>
                  </td>
                  <td class="mono">{j.name}</td>
                  <td>
                    <StateBadge state={j.state} />
                  </td>
                  <td class="num">{j.attempt != null ? `${j.attempt}/${j.maxAttempts ?? '?'}` : ''}</td>
                  <td>
                    <Time iso={j.createdAt} />
                  </td>
                  <td>{when(j)}</td>
                  <td class="mono payload-cell" title={j.payloadPreview ?? ''}>
                    {j.payloadPreview ?? ''}
                    {j.lastError?.message &&
                      (j.state === 'failed' ? (
                        <div class="err-line">{j.lastError.message}</div>
                      ) : (
                        <div class="err-line earlier">earlier attempt: {j.lastError.message}</div>
                      ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <div class="pager">
          {f.before && (
            <Link to={pageUrl(qname, { ...f, before: '' })} class="btn btn-plain">
              ⟵ Newest
            </Link>
          )}
          {jobs.data?.next && (
            <Link
              to={pageUrl(qname, { ...f, before: jobs.data.next })}
              class="btn btn-plain"
              title="keyset: the jobs after the last one shown"
            >
              Next page ⟶
            </Link>
          )}
        </div>
      </Section>

      <QueueGroups queue={qname} />

      <div class="two-col">
        <Section title="Limits, retention, dead letters">
          <Settings d={d} />
        </Section>
        <QueueConcurrency queue={qname} actions={actions} onDone={done} />
        {actions && (
          <Section title="Clean finished jobs by age">
            <CleanByAge queue={qname} onDone={done} />
          </Section>
        )}
        {actions && (
          <Section title="Enqueue a job">
            <EnqueueForm queue={qname} names={d.names} onDone={done} />
          </Section>
        )}
      </div>
    </>
  );
}
