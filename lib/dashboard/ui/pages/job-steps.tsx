import { enc } from '../api';
import { ErrorBox, Section } from '../components';
import { absolute, compact, duration } from '../format';
import { usePoll } from '../poll';
import { qs } from '../router';

/** `GET api/jobs/:id/steps`: the job's durable steps (job.step, job.sleep, job.waitFor), oldest first. */
interface StepsAnswer {
  steps: {
    name: string;
    kind: 'step' | 'sleep' | 'wait';
    status: 'done' | 'sleeping' | 'waiting' | 'timed-out';
    result: unknown;
    attempt: number | null;
    startedAt: string | null;
    finishedAt: string | null;
    wakeAt: string | null;
    durationMs: number | null;
  }[];
}

/**
 * The job's steps on its page, refreshed with it: each one's kind, state, the attempt that
 * recorded it, how long it took (a sleep or wait: until when), and its result. Hidden for a job
 * without steps (nearly every job).
 */
export function JobSteps(props: { id: string; on: { connection?: string } }) {
  const { data, error } = usePoll<StepsAnswer>(`/jobs/${enc(props.id)}/steps${qs(props.on)}`);
  if (error) return <ErrorBox error={error} />;
  if (!data || data.steps.length === 0) return null;
  return (
    <Section title={`Steps (${data.steps.length})`}>
      <table class="grid" data-testid="job-steps">
        <thead>
          <tr>
            <th>Step</th>
            <th>Kind</th>
            <th>State</th>
            <th class="num">Attempt</th>
            <th>Took / until</th>
            <th>Result</th>
          </tr>
        </thead>
        <tbody>
          {data.steps.map((s) => (
            <tr key={s.name}>
              <td>{s.name}</td>
              <td>{s.kind}</td>
              <td>{s.status}</td>
              <td class="num">{s.attempt ?? ''}</td>
              <td>{s.durationMs !== null ? duration(s.durationMs) : s.wakeAt ? absolute(s.wakeAt) : ''}</td>
              <td>
                <code>{s.result === null ? '' : compact(s.result)}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Section>
  );
}
