import type { ClaimedRow } from '../db/job-store';
import type { Job } from '../core/job';
import {
  MESSAGING_SYSTEM,
  recordFailure,
  SPAN_KIND,
  storedSpanContext,
  tracing,
  type OtelApi,
  type OtelSpan,
} from '../core/telemetry';

/**
 * The CONSUMER span a handler runs in (`process <queue>`), made only when an OpenTelemetry SDK
 * records spans (`tracing()`); the worker holds none otherwise.
 *
 * Parent or link: the messaging semantic conventions ask a process span to link to the message's
 * creation context, and allow that context as its parent when one message is processed alone.
 * Each job runs alone, with no ambient span in the worker, so the span is the creation context's
 * child (the enqueue, the handler and the jobs it creates share one trace) and carries the link
 * too. A job enqueued without a trace gets a root span.
 */
export class JobSpan {
  private constructor(
    private readonly api: OtelApi,
    private readonly span: OtelSpan,
    private readonly context: unknown,
  ) {}

  /** Null unless spans are recorded. */
  static start(job: Job, trace: ClaimedRow['trace']): JobSpan | null {
    const t = tracing();
    if (!t) return null;
    const creation = trace ? storedSpanContext(t.api, trace) : null;
    const parent = creation ? t.api.trace.setSpanContext(t.api.ROOT_CONTEXT, creation) : t.api.ROOT_CONTEXT;
    const span = t.tracer.startSpan(
      `process ${job.queue}`,
      {
        kind: SPAN_KIND.CONSUMER,
        attributes: {
          'messaging.system': MESSAGING_SYSTEM,
          'messaging.destination.name': job.queue,
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'process',
          'messaging.operation': 'process',
          'messaging.message.id': job.id,
          'pgqueue.job.name': job.name,
          'pgqueue.job.attempt': job.attempt,
          'pgqueue.job.max_attempts': job.maxAttempts,
        },
        ...(creation ? { links: [{ context: creation }] } : { root: true }),
      },
      parent,
    );
    return new JobSpan(t.api, span, t.api.trace.setSpan(parent, span));
  }

  /** Runs the handler with this span active, so its own spans (and jobs it enqueues) are children. */
  run<R>(fn: () => R): R {
    return this.api.context.with(this.context, fn);
  }

  /**
   * The attempt settled: `outcome` is what the worker will write. A failure (retry, failed,
   * dead-letter) records the exception and sets the status to ERROR; a snooze or a cancel is not
   * an error of the handler, and says so in `pgqueue.job.outcome`.
   */
  end(outcome: string, error: unknown): void {
    this.span.setAttribute('pgqueue.job.outcome', outcome);
    if (outcome === 'retry' || outcome === 'failed' || outcome === 'dead-letter') recordFailure(this.span, error);
    this.span.end();
  }
}
