import { ROOT_CONTEXT, trace, createTraceState, type SpanContext } from '@opentelemetry/api';
import { otelApi, storedSpanContext, traceIdOf, type OtelApi } from '../../lib/core/telemetry';

// Reading a stored trace context back: what the worker continues and the dashboard shows. Rows may
// be written by hand, so a malformed value must give "no trace", never an exception.

const api = otelApi() as OtelApi;
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('stored trace contexts', () => {
  it('a W3C traceparent (and tracestate) becomes a remote span context', () => {
    const sc = storedSpanContext(api, { traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: 'vendor=a,other=b' });
    expect(sc).toMatchObject({ traceId: TRACE, spanId: SPAN, traceFlags: 1, isRemote: true });
    expect(sc?.traceState?.serialize()).toBe(createTraceState('vendor=a,other=b').serialize());
    // Usable as a parent with the real API.
    expect(trace.getSpanContext(api.trace.setSpanContext(ROOT_CONTEXT, sc!) as never)).toEqual(sc as SpanContext);
    expect(traceIdOf({ traceparent: `00-${TRACE}-${SPAN}-00` })).toBe(TRACE);
  });

  it.each([
    null,
    'text',
    42,
    {},
    { traceparent: 7 },
    { traceparent: 'junk' },
    { traceparent: `01-${TRACE}-${SPAN}-01` },
    { traceparent: `00-${TRACE.toUpperCase()}-${SPAN}-01` },
    { traceparent: `00-${'0'.repeat(32)}-${SPAN}-01` },
    { traceparent: `00-${TRACE}-${'0'.repeat(16)}-01` },
    { traceparent: `00-${TRACE}-${SPAN}-01-extra` },
  ])('%p is no trace', (stored) => {
    expect(storedSpanContext(api, stored)).toBeNull();
    expect(traceIdOf(stored)).toBeNull();
  });
});
