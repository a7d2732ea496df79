import { useState } from 'preact/hooks';
import { enc } from '../api';
import { Empty, ErrorBox, Section } from '../components';
import { usePoll } from '../poll';
import { qs } from '../router';

/** `GET api/jobs/:id/logs`: a page of the lines the job's handlers wrote with job.log(). */
interface LogsAnswer {
  logs: string[];
  count: number;
  dropped: number;
}

/** Lines per page of the job page's log. */
const PAGE = 200;

/**
 * The job's log on its page: `PAGE` lines at a time, oldest first, refreshed with the page (a
 * running job's lines appear as its worker writes them), with how many the caps dropped.
 */
export function JobLogs(props: { id: string; on: { connection?: string } }) {
  const [offset, setOffset] = useState(0);
  const { data, error } = usePoll<LogsAnswer>(
    `/jobs/${enc(props.id)}/logs${qs({ ...props.on, offset: String(offset), limit: String(PAGE) })}`,
  );
  const title = data ? `Logs (${data.count}${data.dropped ? `, ${data.dropped} dropped over the caps` : ''})` : 'Logs';
  const last = data ? Math.min(offset + data.logs.length, data.count) : 0;
  const paging = data && data.count > PAGE && (
    <>
      <button type="button" class="btn btn-plain" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
        Earlier
      </button>
      <button type="button" class="btn btn-plain" disabled={last >= data.count} onClick={() => setOffset(offset + PAGE)}>
        Later
      </button>
    </>
  );
  return (
    <Section title={title} actions={paging}>
      {error ? (
        <ErrorBox error={error} />
      ) : !data ? null : data.count === 0 ? (
        <Empty>
          {data.dropped
            ? `Every line was dropped over the caps (${data.dropped}).`
            : 'No line logged: the handler never called job.log().'}
        </Empty>
      ) : (
        <>
          {data.count > PAGE && (
            <p class="muted">
              Lines {offset + 1} to {last} of {data.count}.
            </p>
          )}
          <pre class="stack job-logs" data-testid="job-logs">
            {data.logs.join('\n')}
          </pre>
          {data.dropped > 0 && (
            <p class="muted" data-testid="job-logs-dropped">
              {data.dropped} later line(s) dropped: the job reached the jobLogs caps (the first lines are kept).
            </p>
          )}
        </>
      )}
    </Section>
  );
}
