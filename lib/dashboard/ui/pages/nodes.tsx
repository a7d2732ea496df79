import type { NodeRow } from '../api';
import { enc } from '../api';
import { Empty, ErrorBox, Link, Loading, Section, Time } from '../components';
import { num } from '../format';
import { usePoll } from '../poll';

export function NodesPage() {
  const { data, error } = usePoll<{ nodes: NodeRow[] }>('/nodes');
  if (!data) return error ? <ErrorBox error={error} /> : <Loading />;
  return (
    <>
      <ErrorBox error={error} title="Refresh failed; showing the last answer" />
      <Section title="Live nodes" actions={<span class="muted">a node drops off a few heartbeats after it stops</span>}>
        {data.nodes.length === 0 ? (
          <Empty>No live worker node. Nothing is processing jobs right now.</Empty>
        ) : (
          <table class="grid" data-testid="nodes-table">
            <thead>
              <tr>
                <th>Node</th>
                <th>Host</th>
                <th class="num">PID</th>
                <th>Queues (concurrency)</th>
                <th class="num">Running now</th>
                <th>Last heartbeat</th>
                <th>Started</th>
              </tr>
            </thead>
            <tbody>
              {data.nodes.map((n) => (
                <tr key={n.id}>
                  <td class="mono">{n.id}</td>
                  <td>{n.host}</td>
                  <td class="num mono">{n.pid}</td>
                  <td>
                    {n.queues.map((q) => (
                      <span key={q.name} class="chip">
                        <Link to={`/queues/${enc(q.name)}`}>{q.name}</Link> <span class="muted">×{q.concurrency}</span>
                      </span>
                    ))}
                  </td>
                  <td class={`num${n.running ? '' : ' zero'}`}>{num(n.running)}</td>
                  <td>
                    <Time iso={n.lastSeenAt} />
                  </td>
                  <td>
                    <Time iso={n.startedAt} />
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
