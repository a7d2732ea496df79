// The queue page's settings panel (queue.tsx): worker options and retention.
import { enc, type QueueDetail } from '../api';
import { Json, Link } from '../components';
import { compact, duration } from '../format';

/** A queue's worker options and retention, as this app registers them. */
export function Settings(props: { d: QueueDetail }) {
  const o = props.d.options;
  return (
    <dl class="kv">
      {o === null && (
        <>
          <dt>Options</dt>
          <dd class="muted">this app does not register the queue, so its worker options are not known here</dd>
        </>
      )}
      {o && (
        <>
          <dt>Concurrency</dt>
          <dd>{o.concurrency ?? '–'} per node</dd>
          <dt>Global concurrency</dt>
          <dd>{o.globalConcurrency ?? <span class="muted">none</span>}</dd>
          <dt>Rate limit</dt>
          <dd>{o.limiter ? <span class="mono">{compact(o.limiter, 200)}</span> : <span class="muted">none</span>}</dd>
          <dt>Dead-letter queue</dt>
          <dd>
            {o.deadLetterQueue ? (
              <Link to={`/queues/${enc(o.deadLetterQueue)}`}>{o.deadLetterQueue}</Link>
            ) : (
              <span class="muted">none</span>
            )}
          </dd>
          <dt>Job defaults</dt>
          <dd>
            {o.defaultJobOptions ? (
              <Json value={o.defaultJobOptions} class="small" />
            ) : (
              <span class="muted">module defaults</span>
            )}
          </dd>
        </>
      )}
      <dt>Retention</dt>
      <dd>
        <Retention value={props.d.retention} />
      </dd>
    </dl>
  );
}

/** `{ completedMs: 86400000, failedMs: null }` as "completed 1 d 0 h · failed kept until removed". */
function Retention(props: { value: unknown }) {
  const v = props.value;
  if (v == null) return <span class="muted">–</span>;
  if (typeof v !== 'object' || Array.isArray(v)) return <Json value={v} class="small" />;
  const entries = Object.entries(v as Record<string, unknown>);
  if (!entries.every(([k, x]) => k.endsWith('Ms') && (x === null || typeof x === 'number')))
    return <Json value={v} class="small" />;
  return (
    <ul class="plain-list">
      {entries.map(([k, x]) => (
        <li key={k}>
          <span class="kv-key">{k.slice(0, -2)}</span>{' '}
          {x === null ? <span class="muted">kept until removed</span> : `kept ${duration(x as number)}`}
        </li>
      ))}
    </ul>
  );
}
