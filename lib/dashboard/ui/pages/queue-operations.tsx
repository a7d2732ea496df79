// The queue page's actions over every job matching a filter, clean by age and drain (issue 27
// point 8). Each counts first (GET .../count, capped at 100,000: "at least"), shows the count in
// a confirmation, and runs the batched call only once confirmed.

import { useEffect, useState } from 'preact/hooks';
import { enc, get, post, type JobState } from '../api';
import type { ActionResult } from '../components';
import { num } from '../format';
import { qs } from '../router';

interface Count {
  count: number;
  atLeast: boolean;
}

const countText = (c: Count): string => `${c.atLeast ? 'at least ' : ''}${num(c.count)}`;

type Phase = { at: 'idle' } | { at: 'counting' } | { at: 'armed'; count: Count } | { at: 'running' };

/**
 * A two-step action over many jobs: the first click counts them, the confirmation names the
 * count, the second click runs it. Nothing to act on: it says so and runs nothing.
 */
export function CountedAction(props: {
  label: string;
  /** The confirmation's question, given the count ("Remove 1,234 failed jobs?"). */
  question: (count: string) => string;
  count: () => Promise<Count>;
  run: () => Promise<string>;
  onDone: (r: ActionResult) => void;
  kind?: 'danger' | 'plain';
  testId: string;
  disabled?: boolean;
}) {
  const [phase, setPhase] = useState<Phase>({ at: 'idle' });
  const fail = (err: unknown): void => {
    setPhase({ at: 'idle' });
    props.onDone({ ok: false, message: `${props.label}: ${(err as Error).message}` });
  };
  const start = async (): Promise<void> => {
    setPhase({ at: 'counting' });
    try {
      const count = await props.count();
      if (count.count === 0) {
        setPhase({ at: 'idle' });
        props.onDone({ ok: true, message: `${props.label}: no job matches, nothing done` });
      } else setPhase({ at: 'armed', count });
    } catch (err) {
      fail(err);
    }
  };
  const confirm = async (): Promise<void> => {
    setPhase({ at: 'running' });
    try {
      const message = await props.run();
      setPhase({ at: 'idle' });
      props.onDone({ ok: true, message });
    } catch (err) {
      fail(err);
    }
  };
  if (phase.at === 'armed') {
    return (
      <span class="action confirm" data-testid={`${props.testId}-confirmation`}>
        <span class="confirm-text">{props.question(countText(phase.count))}</span>
        <button
          type="button"
          class={`btn btn-${props.kind ?? 'plain'} armed`}
          onClick={() => void confirm()}
          data-testid={`${props.testId}-confirm`}
        >
          Yes, {props.label.toLowerCase()}
        </button>
        <button type="button" class="btn btn-link" onClick={() => setPhase({ at: 'idle' })}>
          Keep them
        </button>
      </span>
    );
  }
  return (
    <span class="action">
      <button
        type="button"
        class={`btn btn-${props.kind ?? 'plain'}`}
        disabled={phase.at !== 'idle' || props.disabled}
        onClick={() => void start()}
        data-testid={props.testId}
      >
        {phase.at === 'counting' ? 'Counting…' : phase.at === 'running' ? `${props.label}…` : props.label}
      </button>
    </span>
  );
}

/** How many jobs of the queue match, from the count route. */
const countOf = (queue: string, q: { state: string; name?: string; olderThanMs?: string }): Promise<Count> =>
  get<Count>(`/queues/${enc(queue)}/count${qs(q)}`);

const RETRY: readonly JobState[] = ['completed', 'failed', 'cancelled'];
const REMOVE: readonly JobState[] = ['waiting', 'delayed', 'waiting-children', 'completed', 'failed', 'cancelled'];
const CANCEL: readonly JobState[] = ['waiting', 'delayed', 'waiting-children', 'active'];

/** The actions over every job of the tab's state (and the name filter): retry, promote, cancel, remove. */
export function MatchingActions(props: { queue: string; state: JobState; name: string; onDone: (r: ActionResult) => void }) {
  const { queue, state, name } = props;
  const what = (count: string): string => `${count} ${state} job(s)${name ? ` named “${name}”` : ''}`;
  const count = (): Promise<Count> => countOf(queue, { state, name });
  const body = { state, ...(name ? { name } : {}) };
  const matching =
    (action: 'retry' | 'remove' | 'cancel', key: 'retried' | 'removed' | 'cancelled', verb: string) => async () => {
      const r = await post<Record<string, number>>(`/queues/${enc(queue)}/${action}-matching`, body);
      return `${verb} ${num(r[key])} ${state} job(s)${name ? ` named “${name}”` : ''}`;
    };
  return (
    <div class="matching" data-testid="matching-actions">
      <span class="muted">
        Every {state} job{name ? ` named “${name}”` : ''}, not only this page:
      </span>
      {state === 'delayed' && (
        <CountedAction
          label="Promote all"
          question={(n) => `Make ${what(n)} due now?`}
          count={count}
          run={async () => {
            const r = await post<{ promoted: number }>(`/queues/${enc(queue)}/promote-all`, name ? { name } : {});
            return `${num(r.promoted)} delayed job(s) due now`;
          }}
          onDone={props.onDone}
          testId="promote-all"
        />
      )}
      {RETRY.includes(state) && (
        <CountedAction
          label="Retry all"
          question={(n) => `Run ${what(n)} again?`}
          count={count}
          run={matching('retry', 'retried', 'Retried')}
          onDone={props.onDone}
          testId="retry-matching"
        />
      )}
      {CANCEL.includes(state) && (
        <CountedAction
          label="Cancel all"
          question={(n) => `Cancel ${what(n)}?`}
          count={count}
          run={matching('cancel', 'cancelled', 'Cancelled')}
          onDone={props.onDone}
          testId="cancel-matching"
        />
      )}
      {REMOVE.includes(state) && (
        <CountedAction
          label="Remove all"
          kind="danger"
          question={(n) => `Remove ${what(n)} for good?`}
          count={count}
          run={matching('remove', 'removed', 'Removed')}
          onDone={props.onDone}
          testId="remove-matching"
        />
      )}
    </div>
  );
}

/** Drain: every waiting and delayed job of the queue (running ones and the history stay). */
export function DrainAction(props: { queue: string; onDone: (r: ActionResult) => void }) {
  return (
    <CountedAction
      label="Drain"
      kind="danger"
      question={(n) => `Remove ${n} waiting and delayed job(s)? Running jobs finish.`}
      count={async () => {
        const [w, d] = await Promise.all([
          countOf(props.queue, { state: 'waiting' }),
          countOf(props.queue, { state: 'delayed' }),
        ]);
        return { count: w.count + d.count, atLeast: w.atLeast || d.atLeast };
      }}
      run={async () => {
        const r = await post<{ removed: number }>(`/queues/${enc(props.queue)}/drain`, {});
        return `Drained: ${num(r.removed)} waiting and delayed job(s) removed`;
      }}
      onDone={props.onDone}
      testId="drain"
    />
  );
}

const UNITS: { label: string; ms: number }[] = [
  { label: 'minutes', ms: 60_000 },
  { label: 'hours', ms: 3_600_000 },
  { label: 'days', ms: 86_400_000 },
];

/** Clean by age: finished jobs of one state older than an age, counted, then removed. */
export function CleanByAge(props: { queue: string; onDone: (r: ActionResult) => void }) {
  const [state, setState] = useState<'completed' | 'failed' | 'cancelled'>('completed');
  const [amount, setAmount] = useState('1');
  const [unit, setUnit] = useState(UNITS[2].ms);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => setProblem(null), [amount]);
  const olderThanMs = (): number => {
    if (!/^\d{1,6}$/.test(amount.trim())) {
      const msg = 'The age is a whole number, 0 for every job of that state';
      setProblem(msg);
      throw new Error(msg);
    }
    return Number(amount.trim()) * unit;
  };
  const label = UNITS.find((u) => u.ms === unit)?.label ?? '';
  const age = `${amount.trim()} ${amount.trim() === '1' ? label.slice(0, -1) : label}`;
  return (
    <div class="clean-form">
      <div class="filter-form">
        <label>
          State
          <select
            value={state}
            onChange={(e) => setState((e.currentTarget as HTMLSelectElement).value as typeof state)}
            data-testid="clean-state"
          >
            <option value="completed">completed</option>
            <option value="failed">failed</option>
            <option value="cancelled">cancelled</option>
          </select>
        </label>
        <label>
          Finished more than
          <input
            value={amount}
            onInput={(e) => setAmount((e.currentTarget as HTMLInputElement).value)}
            inputMode="numeric"
            size={6}
            data-testid="clean-age"
          />
        </label>
        <label>
          &nbsp;
          <select value={unit} onChange={(e) => setUnit(Number((e.currentTarget as HTMLSelectElement).value))}>
            {UNITS.map((u) => (
              <option key={u.ms} value={u.ms}>
                {u.label} ago
              </option>
            ))}
          </select>
        </label>
        <CountedAction
          label="Clean"
          kind="danger"
          question={(n) => `Remove ${n} ${state} job(s) finished more than ${age} ago?`}
          count={() => countOf(props.queue, { state, olderThanMs: String(olderThanMs()) })}
          run={async () => {
            const r = await post<{ removed: number }>(`/queues/${enc(props.queue)}/clean`, {
              state,
              olderThanMs: olderThanMs(),
            });
            return `Cleaned: ${num(r.removed)} ${state} job(s) removed`;
          }}
          onDone={props.onDone}
          testId="clean"
        />
      </div>
      {problem && <div class="field-error">{problem}</div>}
    </div>
  );
}
