import { useState } from 'preact/hooks';
import { enc, onConnection, post, type FlowLink, type JobDetail, type JobFlow, type TimelineEntry } from '../api';
import {
  ActionButton,
  Empty,
  ErrorBox,
  Json,
  Link,
  Loading,
  Notice,
  Section,
  StateBadge,
  Time,
  type ActionResult,
} from '../components';
import { absolute, duration } from '../format';
import { usePoll } from '../poll';
import { navigate, qs } from '../router';
import { settings } from '../settings';
import { JobLogs } from './job-logs';
import { JobSteps } from './job-steps';

interface JobAnswer {
  job: JobDetail;
  timeline: TimelineEntry[];
  flow?: JobFlow | null;
  /** The connection (database) the job was found in. */
  connection?: string;
}

const LIVE = new Set(['waiting', 'delayed', 'active', 'waiting-children']);
/** The states retry acts on (the server retries failed, cancelled and completed jobs). */
const RETRYABLE = new Set(['failed', 'cancelled', 'completed']);

/** Jobs of a flow as links with their states; a job gone from both tables shows its id only. */
function FlowLinks(props: { links: FlowLink[]; testId: string; on: string }) {
  return (
    <ul class="flow-links" data-testid={props.testId}>
      {props.links.map((l) => (
        <li key={l.id}>
          <Link to={`/jobs/${enc(l.id)}${props.on}`}>
            <span class="mono">{l.id}</span>
          </Link>{' '}
          {l.queue ? (
            <span class="mono">
              {l.queue}/{l.name}
            </span>
          ) : (
            <span class="muted">gone (pruned or removed)</span>
          )}{' '}
          {l.state && <StateBadge state={l.state} />}
        </li>
      ))}
    </ul>
  );
}

/** Its parents (the jobs that wait on it) and its children (the jobs it waits on). */
function FlowSection(props: { flow: JobFlow; on: string }) {
  const f = props.flow;
  return (
    <div class="two-col">
      <Section title={`Parents (${f.parents.length})`}>
        {f.parents.length === 0 ? (
          <Empty>No job waits on this one.</Empty>
        ) : (
          <FlowLinks links={f.parents} testId="flow-parents" on={props.on} />
        )}
      </Section>
      <Section title={`Children (${f.childrenTotal}${f.childrenPending ? `, ${f.childrenPending} not finished` : ''})`}>
        {f.childrenTotal === 0 ? (
          <Empty>This job waits on no other.</Empty>
        ) : (
          <>
            <FlowLinks links={f.children} testId="flow-children" on={props.on} />
            {f.childrenTotal > f.children.length && (
              <p class="muted">
                The first {f.children.length} of {f.childrenTotal}, by id.
              </p>
            )}
          </>
        )}
      </Section>
    </div>
  );
}

const EVENT_LABEL: Record<string, string> = {
  created: 'Created',
  due: 'Due',
  failed: 'Failed',
  cancelled: 'Cancelled',
};

/** How an attempt ended, as its line says it. */
const OUTCOME_LABEL: Record<string, string> = {
  running: 'running',
  error: 'failed',
  completed: 'completed',
  failed: 'failed, no attempts left',
  cancelled: 'cancelled',
};

/** Created, each attempt once (started -> ended, its duration and node), then due or the end without an attempt. */
function Timeline(props: { entries: TimelineEntry[] }) {
  return (
    <ol class="timeline" data-testid="timeline">
      {props.entries.map((t, i) => {
        const attempt = t.event === 'attempt';
        const cls = attempt ? `ev-attempt ev-${t.outcome ?? 'error'}` : `ev-${t.event}`;
        return (
          <li key={i} class={`ev ${cls.replace(/[^a-z -]/gi, '-').toLowerCase()}`} data-event={t.event}>
            <span class="ev-dot" />
            <span class="ev-main">
              <span class="ev-name">{attempt ? `Attempt ${t.attempt}` : (EVENT_LABEL[t.event] ?? t.event)}</span>
              {attempt && <span class="ev-outcome"> {OUTCOME_LABEL[t.outcome ?? ''] ?? t.outcome}</span>}
              {!attempt && t.event === 'due' && t.attempt ? <span class="muted"> · attempt {t.attempt}</span> : null}
              {attempt && (
                <span class="ev-span" data-testid="attempt-span">
                  {t.startedAt ? absolute(t.startedAt) : 'start not recorded'} {'->'} {t.endedAt ? absolute(t.endedAt) : 'now'}
                  {t.durationMs != null && <span class="ev-duration"> ({duration(t.durationMs)})</span>}
                  {t.clock === 'worker' && <span class="muted"> (end: worker's clock)</span>}
                </span>
              )}
              {t.node && <span class="ev-node mono">on {t.node}</span>}
              {t.error && <span class="ev-errtext">{t.error}</span>}
            </span>
            <span class="ev-time">
              <Time iso={t.at} />
              <span class="abs">{absolute(t.at)}</span>
            </span>
          </li>
        );
      })}
    </ol>
  );
}

export function JobPage(props: { id: string; connection?: string | null }) {
  const { data, error, reload } = usePoll<JobAnswer>(`/jobs/${enc(props.id)}${qs(onConnection(props.connection))}`);
  const [notice, setNotice] = useState<ActionResult | null>(null);
  const done = (r: ActionResult): void => {
    setNotice(r);
    void reload();
  };

  if (!data) {
    return (
      <>
        <h1 class="page-title">
          <span class="muted">Job</span> {props.id}
        </h1>
        {error ? (
          error.status === 404 ? (
            <Empty>No job {props.id}: it never existed, was removed, or its history was pruned by retention.</Empty>
          ) : (
            <ErrorBox error={error} />
          )
        ) : (
          <Loading />
        )}
      </>
    );
  }
  const j = data.job;
  const ids = [j.id];
  const on = onConnection(data.connection ?? props.connection);
  const nodeOf = (attempt: number): string | null | undefined =>
    j.errors.find((e) => e.attempt === attempt)?.worker ??
    data.timeline.find((t) => t.attempt === attempt && t.node)?.node ??
    (attempt === j.attempt ? j.lockedBy : null);

  return (
    <>
      <div class="page-head">
        <h1 class="page-title">
          <span class="muted">Job</span> <span class="mono">{j.id}</span> <span class="mono">{j.name}</span>{' '}
          <StateBadge state={j.state} />
        </h1>
        {!settings.readOnly && (
          <div class="page-actions">
            {RETRYABLE.has(j.state) && (
              <ActionButton
                label="Retry"
                kind="primary"
                testId="retry-job"
                run={async () => {
                  const r = await post<{ retried: string[] }>('/jobs/retry', { ids, ...on });
                  return r.retried.length
                    ? `Job ${j.id} is waiting again`
                    : `Job ${j.id} was not retried (it is no longer finished)`;
                }}
                onDone={done}
              />
            )}
            {j.state === 'delayed' && (
              <ActionButton
                label="Promote"
                testId="promote-job"
                run={async () => {
                  const r = await post<{ promoted: string[] }>('/jobs/promote', { ids, ...on });
                  return r.promoted.length ? `Job ${j.id} is due now` : `Job ${j.id} was not promoted (it is no longer delayed)`;
                }}
                onDone={done}
              />
            )}
            {LIVE.has(j.state) && (
              <ActionButton
                label="Cancel"
                testId="cancel-job"
                run={async () => {
                  const r = await post<{ cancelled: string[]; cancelling: string[] }>('/jobs/cancel', { ids, ...on });
                  if (r.cancelled.length) return `Job ${j.id} cancelled`;
                  if (r.cancelling.length)
                    return `Job ${j.id} is running: its signal was aborted, it ends cancelled once the handler stops`;
                  return `Job ${j.id} was not cancelled (it had already finished)`;
                }}
                onDone={done}
              />
            )}
            {j.state !== 'active' && (
              <ActionButton
                label="Remove"
                kind="danger"
                confirm="Remove for good?"
                testId="remove-job"
                run={async () => {
                  const r = await post<{ removed: string[] }>('/jobs/remove', { ids, ...on });
                  if (!r.removed.length) return `Job ${j.id} was not removed (it is running: cancel it first)`;
                  navigate(`/queues/${enc(j.queue ?? '')}`);
                  return `Job ${j.id} removed`;
                }}
                onDone={done}
              />
            )}
          </div>
        )}
      </div>
      <Notice result={notice} onClose={() => setNotice(null)} />
      <ErrorBox error={error} title="Refresh failed; showing the last answer" />

      <div class="two-col">
        <Section title="Job">
          <dl class="kv">
            <dt>Queue</dt>
            <dd>{j.queue ? <Link to={`/queues/${enc(j.queue)}`}>{j.queue}</Link> : '–'}</dd>
            <dt>Attempt</dt>
            <dd>
              {j.attempt} of {j.maxAttempts}
            </dd>
            <dt>Priority</dt>
            <dd>{j.priority ?? 0}</dd>
            {j.group && (
              <>
                <dt>Group</dt>
                <dd class="mono" data-testid="job-group">
                  {j.queue ? (
                    <Link to={`/queues/${enc(j.queue)}${qs({ state: 'waiting', group: j.group })}`}>{j.group}</Link>
                  ) : (
                    j.group
                  )}
                </dd>
              </>
            )}
            {j.uniqueKey && (
              <>
                <dt>Unique key</dt>
                <dd class="mono">{j.uniqueKey}</dd>
              </>
            )}
            {j.timeoutMs != null && (
              <>
                <dt>Timeout</dt>
                <dd>{duration(j.timeoutMs)}</dd>
              </>
            )}
            {j.lockedBy && (
              <>
                <dt>{LIVE.has(j.state) ? 'Running on' : 'Last ran on'}</dt>
                <dd class="mono">{j.lockedBy}</dd>
              </>
            )}
            {j.progress != null && (
              <>
                <dt>Progress</dt>
                <dd data-testid="job-progress">
                  <Progress value={j.progress} />
                </dd>
              </>
            )}
            {j.traceId && (
              <>
                <dt>Trace</dt>
                <dd class="mono" data-testid="job-trace">
                  {j.traceId}
                </dd>
              </>
            )}
            <dt>Created</dt>
            <dd>
              <Time iso={j.createdAt} abs />
            </dd>
            <dt>Due</dt>
            <dd>
              <Time iso={j.runAt} abs />
            </dd>
            {j.finishedAt && (
              <>
                <dt>Finished</dt>
                <dd>
                  <Time iso={j.finishedAt} abs />
                </dd>
              </>
            )}
          </dl>
        </Section>
        <Section title="Timeline">
          {data.timeline.length === 0 ? <Empty>No events recorded.</Empty> : <Timeline entries={data.timeline} />}
        </Section>
      </div>

      {data.flow && <FlowSection flow={data.flow} on={qs(on)} />}

      <div class="two-col">
        <Section title="Payload">
          <Json value={j.payload} />
        </Section>
        <Section title="Result">
          {j.state === 'completed' ? <Json value={j.result ?? null} /> : <Empty>No result: the job has not completed.</Empty>}
        </Section>
      </div>

      <JobSteps id={j.id} on={on} />

      <JobLogs id={j.id} on={on} />

      <Section title={`Errors (${j.errors.length})`}>
        {j.errors.length === 0 ? (
          <Empty>No attempt has failed.</Empty>
        ) : (
          <ol class="errors" data-testid="errors">
            {[...j.errors].reverse().map((e) => (
              <li key={`${e.attempt}-${e.at}`} class="attempt-error">
                <div class="err-head">
                  <span class="badge state-failed">attempt {e.attempt}</span>
                  <strong class="mono">{e.name}</strong>
                  <span class="err-msg">{e.message}</span>
                  <span class="muted err-meta">
                    <Time iso={e.at} />
                    {nodeOf(e.attempt) && <span class="mono"> · on {nodeOf(e.attempt)}</span>}
                  </span>
                </div>
                {e.stack && <pre class="stack">{e.stack}</pre>}
              </li>
            ))}
          </ol>
        )}
      </Section>
    </>
  );
}

/**
 * A job's progress: a number from 0 to 100 as a bar with its percentage (the common use), any
 * other number as it is, an object as its JSON (progress values are small: maxProgressBytes).
 */
function Progress(props: { value: number | Record<string, unknown> }) {
  const v = props.value;
  if (typeof v === 'number' && v >= 0 && v <= 100) {
    return (
      <span class="progress">
        <span class="progress-bar" role="progressbar" aria-valuenow={v} aria-valuemin={0} aria-valuemax={100}>
          <span class="progress-fill" style={{ width: `${v}%` }} />
        </span>
        <span class="progress-text">{v} %</span>
      </span>
    );
  }
  return <span class="mono progress-text">{typeof v === 'number' ? String(v) : JSON.stringify(v)}</span>;
}
