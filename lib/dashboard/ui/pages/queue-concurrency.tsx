// The queue page's concurrency panel (issue 28 point 4): the cap across every node (the one
// stored by setGlobalConcurrency, which wins, and this app's globalConcurrency option) and each
// live node's concurrency, from GET api/queues/:queue/concurrency. Unless the dashboard is
// read-only, it sets or removes the stored cap and sets one node's concurrency, each after a
// confirmation on the button (the house ActionButton), and says what the server answered.

import { useState } from 'preact/hooks';
import { enc, post } from '../api';
import { ActionButton, Empty, ErrorBox, Loading, Section, type ActionResult } from '../components';
import { num } from '../format';
import { usePoll } from '../poll';

interface Concurrency {
  nodes: { id: string; host: string; pid: number; concurrency: number }[];
  globalConcurrency: { option: number | null; stored: number | null };
}

/** A whole number within the server's bounds, or the sentence that says what to type instead. */
function wholeIn(text: string, max: number): { n: number } | { problem: string } {
  const t = text.trim();
  if (t === '') return { problem: '' };
  const n = /^\d{1,10}$/.test(t) ? Number(t) : NaN;
  return n >= 1 && n <= max ? { n } : { problem: `A whole number from 1 to ${num(max)}` };
}

/** The stored cap's bound (a PostgreSQL integer) and a node's (registerQueue's concurrency). */
const CAP_MAX = 2_147_483_647;
const NODE_MAX = 1000;

function NumberAction(props: {
  max: number;
  label: string;
  confirm: (n: number) => string;
  run: (n: number) => Promise<string>;
  onDone: (r: ActionResult) => void;
  testId: string;
}) {
  const [text, setText] = useState('');
  const v = wholeIn(text, props.max);
  return (
    <span class="action">
      <input
        value={text}
        onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
        inputMode="numeric"
        size={6}
        aria-label={props.label}
        data-testid={`${props.testId}-input`}
      />
      <ActionButton
        label={props.label}
        disabled={!('n' in v)}
        confirm={'n' in v ? props.confirm(v.n) : undefined}
        testId={props.testId}
        run={async () => {
          if (!('n' in v)) throw new Error(v.problem);
          const message = await props.run(v.n);
          setText('');
          return message;
        }}
        onDone={props.onDone}
      />
      {'problem' in v && v.problem && <span class="field-error">{v.problem}</span>}
    </span>
  );
}

/** The concurrency panel of one queue; `actions` false (read-only dashboard) shows it without forms. */
export function QueueConcurrency(props: { queue: string; actions: boolean; onDone: (r: ActionResult) => void }) {
  const { queue } = props;
  const conc = usePoll<Concurrency>(`/queues/${enc(queue)}/concurrency`);
  const done = (r: ActionResult): void => {
    props.onDone(r);
    void conc.reload();
  };
  const c = conc.data;
  const g = c?.globalConcurrency;
  return (
    <Section title="Concurrency">
      <ErrorBox error={conc.error} />
      {!c || !g ? (
        !conc.error && <Loading />
      ) : (
        <div data-testid="concurrency-panel">
          <dl class="kv">
            <dt>Global cap</dt>
            <dd data-testid="global-cap">
              {g.stored !== null ? (
                <>
                  {num(g.stored)} <span class="muted">stored, across every node</span>
                </>
              ) : g.option !== null ? (
                <>
                  {num(g.option)} <span class="muted">from the globalConcurrency option</span>
                </>
              ) : (
                <span class="muted">none</span>
              )}
            </dd>
            <dt>Option</dt>
            <dd data-testid="global-cap-option">
              {g.option !== null ? num(g.option) : <span class="muted">none</span>}
              {g.stored !== null && g.option !== null && <span class="muted"> (the stored cap overrides it)</span>}
            </dd>
          </dl>
          {props.actions && (
            <div class="filter-form">
              <NumberAction
                max={CAP_MAX}
                label="Set cap"
                confirm={(n) => `Cap ${queue} at ${num(n)} across every node?`}
                run={async (n) => {
                  await post(`/queues/${enc(queue)}/global-concurrency`, { globalConcurrency: n });
                  return `Queue ${queue}: at most ${num(n)} job(s) run at once across every node`;
                }}
                onDone={done}
                testId="set-global-cap"
              />
              <ActionButton
                label="Remove stored cap"
                kind="danger"
                disabled={g.stored === null}
                confirm={g.option !== null ? `Back to the option's ${num(g.option)}?` : 'Remove the cap?'}
                testId="remove-global-cap"
                run={async () => {
                  await post(`/queues/${enc(queue)}/global-concurrency`, { globalConcurrency: null });
                  return g.option !== null
                    ? `Queue ${queue}: stored cap removed, the option's ${num(g.option)} applies`
                    : `Queue ${queue}: stored cap removed, no cap across nodes`;
                }}
                onDone={done}
              />
            </div>
          )}
          {c.nodes.length === 0 ? (
            <Empty>No live node runs a worker for this queue.</Empty>
          ) : (
            <table class="grid" data-testid="concurrency-nodes">
              <thead>
                <tr>
                  <th>Node</th>
                  <th class="num">Concurrency</th>
                  {props.actions && <th>Change</th>}
                </tr>
              </thead>
              <tbody>
                {c.nodes.map((n) => (
                  <tr key={n.id} data-node-id={n.id}>
                    <td class="mono" title={n.id}>
                      {n.host}:{n.pid}
                    </td>
                    <td class="num">{num(n.concurrency)}</td>
                    {props.actions && (
                      <td>
                        <NumberAction
                          max={NODE_MAX}
                          label="Set"
                          confirm={(k) => `Run ${num(k)} at once on ${n.host}:${n.pid}?`}
                          run={async (k) => {
                            await post(`/queues/${enc(queue)}/nodes/${enc(n.id)}/concurrency`, { concurrency: k });
                            return `Node ${n.host}:${n.pid} asked to run ${num(k)} job(s) of ${queue} at once; its next heartbeat shows it`;
                          }}
                          onDone={done}
                          testId="set-node-concurrency"
                        />
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      )}
    </Section>
  );
}
