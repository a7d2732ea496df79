import { MESSAGING_SYSTEM, recordFailure, SPAN_KIND, tracing } from '../core/telemetry';

/**
 * Runs an enqueue inside a PRODUCER span (`send <queue>`, per the OpenTelemetry messaging
 * semantic conventions), when an SDK records spans; otherwise runs it as it is, allocating
 * nothing. The rows are built inside `run`, so each job records this span's context
 * (buildJobRow reads the active context): the handler's span then continues from it.
 *
 * Flows and any other path that creates jobs: build rows with buildJobRow inside an active
 * span (this one, or the caller's) and every job records that span's trace, so one trace runs
 * from the first enqueue through every job created on the way, in handlers too (their spans are
 * active while they run).
 */
export async function tracedEnqueue<T>(
  queue: string,
  operation: string,
  count: number,
  run: () => Promise<T>,
  ids: (out: T) => readonly { readonly id: string }[],
): Promise<T> {
  const t = tracing();
  if (!t) return run();
  const span = t.tracer.startSpan(`send ${queue}`, {
    kind: SPAN_KIND.PRODUCER,
    attributes: {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.destination.name': queue,
      'messaging.operation.type': 'send',
      'messaging.operation.name': operation,
      // The attribute of semantic conventions before 1.26, which many backends still read.
      'messaging.operation': 'publish',
      ...(count === 1 ? {} : { 'messaging.batch.message_count': count }),
    },
  });
  try {
    const out = await t.api.context.with(t.api.trace.setSpan(t.api.context.active(), span), run);
    const jobs = ids(out);
    if (jobs.length === 1) span.setAttribute('messaging.message.id', jobs[0].id);
    return out;
  } catch (err) {
    recordFailure(span, err);
    throw err;
  } finally {
    span.end();
  }
}
