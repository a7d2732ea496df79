import { useState } from 'preact/hooks';
import type { Overview as OverviewData } from '../api';
import { ThroughputChart } from '../chart';
import { Empty, ErrorBox, Link, Loading, Section } from '../components';
import { duration, num } from '../format';
import { usePoll } from '../poll';
import { qs } from '../router';

/** A count that links to the queue's jobs in that state; zero is shown quietly. */
function Count(props: { queue: string; state?: string; n: number; tone?: string }) {
  const cls = `num${props.n === 0 ? ' zero' : props.tone ? ' ' + props.tone : ''}`;
  if (!props.state) return <td class={cls}>{num(props.n)}</td>;
  return (
    <td class={cls}>
      <Link to={`/queues/${encodeURIComponent(props.queue)}${qs({ state: props.state })}`}>{num(props.n)}</Link>
    </td>
  );
}

export function OverviewPage() {
  const { data, error } = usePoll<OverviewData>('/overview');
  const [only, setOnly] = useState<string>('');
  if (!data) return error ? <ErrorBox error={error} /> : <Loading />;
  const sum = (k: 'completed' | 'failed'): number => data.throughput[k].reduce((a, b) => a + b, 0);
  // More than one database: each queue says which, and the list can be narrowed to one.
  const connections = data.connections ?? [];
  const many = connections.length > 1;
  const rows = many && only ? data.queues.filter((q) => q.connection === only) : data.queues;
  return (
    <>
      <ErrorBox error={error} title="Refresh failed; showing the last answer" />
      <Section
        title="Queues"
        actions={
          many && (
            <label class="muted">
              Connection{' '}
              <select
                value={only}
                onChange={(e) => setOnly((e.currentTarget as HTMLSelectElement).value)}
                data-testid="connection-filter"
              >
                <option value="">all</option>
                {connections.map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
            </label>
          )
        }
      >
        {data.queues.length === 0 ? (
          <Empty>No queues yet. A queue appears here once it is registered or has a job.</Empty>
        ) : (
          <table class="grid" data-testid="queues-table">
            <thead>
              <tr>
                <th>Queue</th>
                {many && <th>Connection</th>}
                <th class="num">Waiting</th>
                <th class="num">Delayed</th>
                <th class="num" title="Parents of flows waiting for their children to finish">
                  Waiting children
                </th>
                <th class="num">Active</th>
                <th class="num">Stalled</th>
                <th class="num">Failed</th>
                <th class="num">Cancelled</th>
                <th class="num" title="Parked by job.sleep() or job.waitFor(): no worker holds them (listed under delayed)">
                  Parked
                </th>
                <th class="num">Oldest waiting</th>
                <th>State</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((q) => (
                <tr key={`${q.connection ?? ''}:${q.name}`} data-queue={q.name}>
                  <td>
                    <Link to={`/queues/${encodeURIComponent(q.name)}`} class="queue-name">
                      {q.name}
                    </Link>
                    {!q.registered && (
                      <span class="tag" title="No node of this app registers this queue: nothing here runs its jobs">
                        not registered here
                      </span>
                    )}
                  </td>
                  {many && <td class="mono">{q.connection}</td>}
                  <Count queue={q.name} state="waiting" n={q.waiting} />
                  <Count queue={q.name} state="delayed" n={q.delayed} />
                  <Count queue={q.name} state="waiting-children" n={q.waitingChildren} />
                  <Count queue={q.name} state="active" n={q.active} />
                  <Count queue={q.name} n={q.stalled} tone="warn" />
                  <Count queue={q.name} state="failed" n={q.failed} tone="bad" />
                  <Count queue={q.name} state="cancelled" n={q.cancelled} />
                  <Count queue={q.name} state="delayed" n={(q.sleeping ?? 0) + (q.waitingSignal ?? 0)} />
                  <td class="num">
                    {q.oldestWaitingAgeMs == null ? <span class="muted">–</span> : duration(q.oldestWaitingAgeMs)}
                  </td>
                  <td>{q.paused ? <span class="badge paused">paused</span> : <span class="badge running">running</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section
        title="Throughput, last hour"
        actions={
          <span class="muted">
            {num(sum('completed'))} completed · {num(sum('failed'))} failed
          </span>
        }
      >
        <ThroughputChart data={data.throughput} />
      </Section>
    </>
  );
}
