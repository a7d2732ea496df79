// The queue page's job filters: read from and written to the URL, and the form that sets them
// (queue.tsx shows the list they select).
import { useEffect, useState } from 'preact/hooks';
import { JOB_STATES, enc, onConnection, type JobState } from '../api';
import { Link } from '../components';
import { navigate, qs } from '../router';

/** The job list's filters, as the queue page's URL holds them. */
export interface Filters {
  state: JobState;
  name: string;
  uniqueKey: string;
  payload: string;
  group: string;
  before: string;
}

export function filtersOf(q: URLSearchParams): Filters {
  const s = q.get('state') as JobState | null;
  return {
    state: s && JOB_STATES.includes(s) ? s : 'waiting',
    name: q.get('name') ?? '',
    uniqueKey: q.get('uniqueKey') ?? '',
    payload: q.get('payload') ?? '',
    group: q.get('group') ?? '',
    before: q.get('before') ?? '',
  };
}

export const pageUrl = (queue: string, f: Partial<Filters>): string =>
  `/queues/${enc(queue)}${qs({ state: f.state, name: f.name, uniqueKey: f.uniqueKey, payload: f.payload, group: f.group, before: f.before })}`;

/** The filter form above the job list: name, unique key, payload match, group, and a job found by id. */
export function Filters(props: { queue: string; f: Filters; names: string[]; connection?: string }) {
  const [name, setName] = useState(props.f.name);
  const [uniqueKey, setUniqueKey] = useState(props.f.uniqueKey);
  const [payload, setPayload] = useState(props.f.payload);
  const [group, setGroup] = useState(props.f.group);
  const [id, setId] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    setName(props.f.name);
    setUniqueKey(props.f.uniqueKey);
    setPayload(props.f.payload);
    setGroup(props.f.group);
  }, [props.f.name, props.f.uniqueKey, props.f.payload, props.f.group]);

  const apply = (e: Event): void => {
    e.preventDefault();
    if (payload.trim()) {
      try {
        const v: unknown = JSON.parse(payload);
        if (v === null || typeof v !== 'object') throw new Error('not an object');
      } catch {
        setProblem('Payload match must be a JSON object or array, e.g. {"orderId": 42}');
        return;
      }
    }
    setProblem(null);
    navigate(
      pageUrl(props.queue, {
        state: props.f.state,
        name: name.trim(),
        uniqueKey: uniqueKey.trim(),
        payload: payload.trim(),
        group: group.trim(),
      }),
    );
  };
  const find = (e: Event): void => {
    e.preventDefault();
    const v = id.trim();
    if (!/^[1-9][0-9]{0,18}$/.test(v)) {
      setProblem('A job id is a positive whole number');
      return;
    }
    setProblem(null);
    navigate(`/jobs/${v}${qs(onConnection(props.connection))}`);
  };
  const active = props.f.name || props.f.uniqueKey || props.f.payload || props.f.group;
  return (
    <div class="filters">
      <form class="filter-form" onSubmit={apply}>
        <label>
          Name
          <select value={name} onChange={(e) => setName((e.currentTarget as HTMLSelectElement).value)} data-testid="filter-name">
            <option value="">any</option>
            {[...new Set([...props.names, ...(props.f.name ? [props.f.name] : [])])].map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <label>
          Unique key
          <input
            value={uniqueKey}
            onInput={(e) => setUniqueKey((e.currentTarget as HTMLInputElement).value)}
            placeholder="exact key"
          />
        </label>
        <label>
          Group
          <input
            value={group}
            onInput={(e) => setGroup((e.currentTarget as HTMLInputElement).value)}
            placeholder="exact group"
            data-testid="filter-group"
          />
        </label>
        <label class="grow">
          Payload contains
          <input
            class="mono"
            value={payload}
            onInput={(e) => setPayload((e.currentTarget as HTMLInputElement).value)}
            placeholder='{"orderId": 42}'
            data-testid="filter-payload"
          />
        </label>
        <button type="submit" class="btn btn-plain">
          Filter
        </button>
        {active && (
          <Link to={pageUrl(props.queue, { state: props.f.state })} class="btn btn-link">
            Clear
          </Link>
        )}
      </form>
      <form class="filter-form find" onSubmit={find}>
        <label>
          Job id
          <input
            value={id}
            onInput={(e) => setId((e.currentTarget as HTMLInputElement).value)}
            placeholder="12345"
            inputMode="numeric"
            size={10}
          />
        </label>
        <button type="submit" class="btn btn-plain">
          Open
        </button>
      </form>
      {problem && <div class="field-error">{problem}</div>}
    </div>
  );
}
