import { useState } from 'preact/hooks';
import { enc, onConnection, post, type JobSummary } from '../api';
import { qs } from '../router';
import type { ActionResult } from '../components';
import { Link } from '../components';

/** Parses a JSON field; the message names the field and where the JSON broke. */
function parseField(label: string, text: string, required: boolean): { value?: unknown; error?: string } {
  if (!text.trim()) return required ? { error: `${label}: enter JSON (for no payload, write null or {})` } : {};
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    return { error: `${label} is not valid JSON: ${(err as Error).message}` };
  }
}

export function EnqueueForm(props: { queue: string; names: string[]; onDone: (r: ActionResult) => void }) {
  const [name, setName] = useState(props.names[0] ?? '');
  const [payload, setPayload] = useState('{\n  \n}');
  const [options, setOptions] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [created, setCreated] = useState<string | null>(null);
  const [createdOn, setCreatedOn] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setCreated(null);
    if (!name.trim()) return setProblem('Name: which handler should run it (a @Process name of this queue)');
    const p = parseField('Payload', payload, true);
    if (p.error) return setProblem(p.error);
    const o = parseField('Options', options, false);
    if (o.error) return setProblem(o.error);
    if (o.value !== undefined && (o.value === null || typeof o.value !== 'object' || Array.isArray(o.value))) {
      return setProblem('Options must be a JSON object, e.g. {"delayMs": 5000, "priority": -1}');
    }
    setProblem(null);
    setBusy(true);
    try {
      const body: Record<string, unknown> = { name: name.trim(), payload: p.value };
      if (o.value !== undefined) body.options = o.value;
      const r = await post<{ job: JobSummary; connection?: string }>(`/queues/${enc(props.queue)}/jobs`, body);
      setCreated(r.job.id);
      setCreatedOn(r.connection ?? null);
      props.onDone({ ok: true, message: `Enqueued job ${r.job.id} (${r.job.name})` });
    } catch (err) {
      setProblem((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="enqueue" onSubmit={(e) => void submit(e)} data-testid="enqueue-form">
      <label>
        Name
        <input list="job-names" value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} class="mono" />
        <datalist id="job-names">
          {props.names.map((n) => (
            <option key={n} value={n} />
          ))}
        </datalist>
      </label>
      <label>
        Payload (JSON)
        <textarea
          class="mono"
          rows={6}
          spellcheck={false}
          value={payload}
          onInput={(e) => setPayload((e.currentTarget as HTMLTextAreaElement).value)}
        />
      </label>
      <label>
        Options (JSON, optional)
        <textarea
          class="mono"
          rows={2}
          spellcheck={false}
          placeholder='{"delayMs": 5000, "attempts": 5, "uniqueKey": "order-42"}'
          value={options}
          onInput={(e) => setOptions((e.currentTarget as HTMLTextAreaElement).value)}
        />
      </label>
      {problem && (
        <div class="field-error" role="alert">
          {problem}
        </div>
      )}
      <div class="form-foot">
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? 'Enqueueing…' : 'Enqueue'}
        </button>
        {created && (
          <span>
            created <Link to={`/jobs/${enc(created)}${qs(onConnection(createdOn))}`}>job {created}</Link>
          </span>
        )}
      </div>
    </form>
  );
}
