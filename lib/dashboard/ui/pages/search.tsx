// The header's search box and its results page (/search?q=): a job id opens that job's page; a
// unique key finds the live job holding it, in every queue (GET api/search).

import { useEffect, useState } from 'preact/hooks';
import { enc, onConnection, type JobState } from '../api';
import { Empty, ErrorBox, Link, Loading, StateBadge } from '../components';
import { usePoll } from '../poll';
import { navigate, qs } from '../router';

interface SearchHit {
  id: string;
  queue: string;
  name: string;
  state: JobState;
  connection: string;
  match: 'id' | 'uniqueKey';
}

const jobUrl = (h: SearchHit): string => `/jobs/${enc(h.id)}${qs(onConnection(h.connection))}`;

/** One box in the header: Enter opens the results page, which opens the job when one matches. */
export function SearchBox(props: { current: string }) {
  const [q, setQ] = useState(props.current);
  useEffect(() => setQ(props.current), [props.current]);
  return (
    <form
      class="search-box"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        const v = q.trim();
        if (v) navigate(`/search${qs({ q: v })}`);
      }}
    >
      <input
        type="search"
        value={q}
        onInput={(e) => setQ((e.currentTarget as HTMLInputElement).value)}
        placeholder="Job id or unique key"
        aria-label="Find a job by id or unique key"
        maxLength={1000}
        data-testid="search-input"
      />
    </form>
  );
}

export function SearchPage(props: { q: string }) {
  const q = props.q.trim();
  const res = usePoll<{ query: string; jobs: SearchHit[] }>(q ? `/search${qs({ q })}` : null);
  const hits = res.data && !res.stale ? res.data.jobs : null;
  // One job found: its page, in place of this one (Back returns to where the search started).
  useEffect(() => {
    if (hits?.length === 1) navigate(jobUrl(hits[0]), { replace: true });
  }, [hits]);
  return (
    <>
      <h1 class="page-title">
        <span class="muted">Search</span> {q}
      </h1>
      {!q ? (
        <Empty>Type a job id or a unique key in the box above.</Empty>
      ) : res.error ? (
        <ErrorBox error={res.error} />
      ) : hits === null || hits.length === 1 ? (
        <Loading />
      ) : hits.length === 0 ? (
        <div class="empty" data-testid="search-none">
          Not found: no job has the id “{q}”, and no waiting, delayed or running job holds the unique key “{q}” (a finished job
          gives its key up).
        </div>
      ) : (
        <table class="grid" data-testid="search-results">
          <thead>
            <tr>
              <th class="num">Id</th>
              <th>Queue</th>
              <th>Name</th>
              <th>State</th>
              <th>Found by</th>
            </tr>
          </thead>
          <tbody>
            {hits.map((h) => (
              <tr key={`${h.connection}:${h.id}:${h.match}`}>
                <td class="num mono">
                  <Link to={jobUrl(h)}>{h.id}</Link>
                </td>
                <td>
                  <Link to={`/queues/${enc(h.queue)}`}>{h.queue}</Link>
                </td>
                <td class="mono">{h.name}</td>
                <td>
                  <StateBadge state={h.state} />
                </td>
                <td>{h.match === 'id' ? 'its id' : 'its unique key'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
