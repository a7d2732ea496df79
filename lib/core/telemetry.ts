import { isInstalled } from './optional-peer';

/**
 * OpenTelemetry, when the app has it: `@opentelemetry/api` is an optional peer, looked up once
 * and loaded only if installed. Without it (or with it but no SDK registered) nothing here makes
 * a span or allocates per job: `tracing()` answers null after one check.
 *
 * The few API members used are typed here structurally rather than imported, so no declaration
 * file of this package names `@opentelemetry/api` (an app without it still type-checks).
 */

const PEER = '@opentelemetry/api';
/** The instrumentation scope of our spans. */
export const TRACER_NAME = 'nestjs-pg-queue';
/** `messaging.system` of our spans: not one of the semantic conventions' well-known values, which allow others. */
export const MESSAGING_SYSTEM = 'nestjs-pg-queue';

/** SpanKind and SpanStatusCode values of the API (stable since 1.0). */
export const SPAN_KIND = { PRODUCER: 3, CONSUMER: 4 } as const;
export const STATUS_ERROR = 2;

export type OtelAttributes = Record<string, string | number | boolean>;

export interface OtelSpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  readonly isRemote?: boolean;
  readonly traceState?: { serialize(): string };
}

export interface OtelSpan {
  spanContext(): OtelSpanContext;
  setAttribute(key: string, value: string | number | boolean): unknown;
  recordException(exception: Error | string): void;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

export interface OtelTracer {
  startSpan(
    name: string,
    options?: { kind?: number; attributes?: OtelAttributes; links?: { context: OtelSpanContext }[]; root?: boolean },
    context?: unknown,
  ): OtelSpan;
}

export interface OtelApi {
  readonly ROOT_CONTEXT: unknown;
  readonly trace: {
    getTracerProvider(): unknown;
    getSpanContext(context: unknown): OtelSpanContext | undefined;
    setSpan(context: unknown, span: OtelSpan): unknown;
    setSpanContext(context: unknown, spanContext: OtelSpanContext): unknown;
  };
  readonly context: { active(): unknown; with<R>(context: unknown, fn: () => R): R };
  createTraceState(raw?: string): { serialize(): string };
}

/** The global tracer provider as the API hands it out: a proxy until an SDK registers a delegate. */
interface ProviderLike {
  getTracer(name: string): OtelTracer;
  getDelegate?(): unknown;
  getDelegateTracer?(name: string): OtelTracer | undefined;
}

let api: OtelApi | null | undefined;
let lastProvider: unknown = undefined;
let lastTracer: OtelTracer | null = null;

/** The API module, or null when it is not installed (looked up once). */
export function otelApi(): OtelApi | null {
  // Optional peer: required only if present, so apps without it load nothing.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (api === undefined) api = isInstalled(PEER) ? (require(PEER) as OtelApi) : null;
  return api;
}

/**
 * The API and our tracer when spans would be recorded: the API is installed and an SDK has
 * registered a tracer provider; null otherwise. Checked per call (an SDK may register after this
 * module loaded), for the cost of two property reads once the tracer is cached.
 */
export function tracing(): { readonly api: OtelApi; readonly tracer: OtelTracer } | null {
  const a = api === undefined ? otelApi() : api;
  if (!a) return null;
  const p = a.trace.getTracerProvider() as ProviderLike;
  const delegate = typeof p.getDelegate === 'function' ? p.getDelegate() : p;
  if (delegate !== lastProvider) {
    lastProvider = delegate;
    // The proxy answers undefined until an SDK set a delegate: then there is nothing to record.
    lastTracer =
      typeof p.getDelegateTracer === 'function' ? (p.getDelegateTracer(TRACER_NAME) ?? null) : p.getTracer(TRACER_NAME);
  }
  return lastTracer ? { api: a, tracer: lastTracer } : null;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A span context worth recording: ids of the right shape, not all zeros. */
function valid(sc: OtelSpanContext): boolean {
  return HEX32.test(sc.traceId) && !/^0+$/.test(sc.traceId) && HEX16.test(sc.spanId) && !/^0+$/.test(sc.spanId);
}

let lastContext: OtelSpanContext | null = null;
let lastJson: string | null = null;

/**
 * The active span's context as the job's stored trace (W3C `traceparent`, and `tracestate` when
 * there is one), as JSON; null without the API or an active span. Jobs of one call share one
 * context: the text is made once for it.
 */
export function activeTraceJson(): string | null {
  const a = api === undefined ? otelApi() : api;
  if (!a) return null;
  const sc = a.trace.getSpanContext(a.context.active());
  if (!sc || !valid(sc)) return null;
  if (sc === lastContext) return lastJson;
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
  const state = sc.traceState?.serialize();
  lastJson = JSON.stringify(
    state
      ? { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`, tracestate: state }
      : { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}` },
  );
  lastContext = sc;
  return lastJson;
}

/**
 * The trace id of a stored trace (`{ traceparent }`), or null: what the dashboard shows. Never
 * throws on a hand-written value.
 */
export function traceIdOf(trace: unknown): string | null {
  const tp = (trace as { traceparent?: unknown } | null)?.traceparent;
  const m = typeof tp === 'string' ? TRACEPARENT.exec(tp) : null;
  return m && valid({ traceId: m[1], spanId: m[2], traceFlags: 0 }) ? m[1] : null;
}

/** A stored trace as a remote span context, or null when absent or malformed. */
export function storedSpanContext(a: OtelApi, trace: unknown): OtelSpanContext | null {
  const t = trace as { traceparent?: unknown; tracestate?: unknown } | null;
  const m = typeof t?.traceparent === 'string' ? TRACEPARENT.exec(t.traceparent) : null;
  if (!m) return null;
  const sc: OtelSpanContext = {
    traceId: m[1],
    spanId: m[2],
    traceFlags: parseInt(m[3], 16),
    isRemote: true,
    ...(typeof t?.tracestate === 'string' && t.tracestate ? { traceState: a.createTraceState(t.tracestate) } : {}),
  };
  return valid(sc) ? sc : null;
}

/** Marks a span failed: the exception recorded and the status ERROR, per the trace API's conventions. */
export function recordFailure(span: OtelSpan, err: unknown): void {
  const e = err instanceof Error ? err : new Error(String(err));
  span.recordException(e);
  span.setStatus({ code: STATUS_ERROR, message: e.message });
}
