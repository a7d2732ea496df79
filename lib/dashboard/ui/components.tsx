// Small pieces every page uses. Everything shown is rendered as text nodes (Preact escapes);
// nothing here, nor anywhere in the dashboard, uses dangerouslySetInnerHTML.

import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from './api';
import { absolute, relative } from './format';
import { href, onLinkClick } from './router';
import { useTick } from './poll';

export function Link(props: { to: string; class?: string; children: ComponentChildren; title?: string }) {
  return (
    <a href={href(props.to)} class={props.class} title={props.title} onClick={onLinkClick}>
      {props.children}
    </a>
  );
}

/** A relative time with the absolute one on hover (and in `abs` mode, beside it). */
export function Time(props: { iso: string | null | undefined; abs?: boolean }) {
  const now = useTick();
  if (!props.iso) return <span class="muted">–</span>;
  return (
    <time dateTime={props.iso} title={absolute(props.iso)}>
      {relative(props.iso, now)}
      {props.abs && <span class="abs"> {absolute(props.iso)}</span>}
    </time>
  );
}

export function StateBadge(props: { state: string }) {
  return <span class={`badge state-${props.state}`}>{props.state}</span>;
}

export function ErrorBox(props: { error: ApiError | Error | string | null; title?: string }) {
  if (!props.error) return null;
  const e = props.error;
  const msg = typeof e === 'string' ? e : e.message;
  const status = e instanceof ApiError && e.status ? ` (${e.status})` : '';
  return (
    <div class="error-box" role="alert">
      <strong>
        {props.title ?? 'The API answered with an error'}
        {status}
      </strong>
      <span>{msg}</span>
    </div>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <div class="empty">{props.children}</div>;
}

export function Loading() {
  return <div class="loading">Loading…</div>;
}

/** JSON, pretty-printed as text. */
export function Json(props: { value: unknown; class?: string }) {
  const text = props.value === undefined ? 'undefined' : JSON.stringify(props.value, null, 2);
  return <pre class={`json ${props.class ?? ''}`}>{text}</pre>;
}

export interface ActionResult {
  ok: boolean;
  message: string;
}

/**
 * A button that runs an action, shows it is busy, and reports its answer. `confirm` makes it a
 * two-step button (no native dialog): the first click arms it, the second runs it.
 */
export function ActionButton(props: {
  label: string;
  run: () => Promise<string | void>;
  onDone?: (r: ActionResult) => void;
  kind?: 'primary' | 'danger' | 'plain';
  confirm?: string;
  disabled?: boolean;
  testId?: string;
}) {
  const [busy, setBusy] = useState(false);
  const [armed, setArmed] = useState(false);
  const click = async (): Promise<void> => {
    if (props.confirm && !armed) {
      setArmed(true);
      return;
    }
    setArmed(false);
    setBusy(true);
    try {
      const msg = await props.run();
      props.onDone?.({ ok: true, message: msg || `${props.label}: done` });
    } catch (err) {
      props.onDone?.({ ok: false, message: `${props.label}: ${(err as Error).message}` });
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="action">
      <button
        type="button"
        class={`btn btn-${props.kind ?? 'plain'}${armed ? ' armed' : ''}`}
        disabled={busy || props.disabled}
        data-testid={props.testId}
        onClick={() => void click()}
        onBlur={() => setArmed(false)}
      >
        {armed ? props.confirm : busy ? `${props.label}…` : props.label}
      </button>
    </span>
  );
}

/** The answer of the last action, until the next one or a click on it. */
export function Notice(props: { result: ActionResult | null; onClose: () => void }) {
  if (!props.result) return null;
  return (
    <div class={`notice ${props.result.ok ? 'ok' : 'bad'}`} role="status" onClick={props.onClose}>
      {props.result.message}
    </div>
  );
}

export function Section(props: { title: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section class="card">
      <header class="card-head">
        <h2>{props.title}</h2>
        {props.actions && <div class="card-actions">{props.actions}</div>}
      </header>
      {props.children}
    </section>
  );
}
