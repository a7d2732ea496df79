import 'reflect-metadata';
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import { context, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { QueueService } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { useTestDatabase, waitFor } from '../support/database';

// OpenTelemetry across two processes: jobs are enqueued here (the producer, with an SDK and the
// in-memory exporter) and run in a forked worker process (its own SDK and in-memory exporter,
// spans sent back over IPC). The two halves must form one trace: the producer span under the
// caller's span, the handler's consumer span under the producer span (and linked to it).

interface PlainSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
  events: { name: string; attributes?: Record<string, unknown> }[];
}

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'traced-worker-process.js');

describe('OpenTelemetry tracing across processes', () => {
  const t = useTestDatabase();
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  let app: INestApplicationContext;
  let queues: QueueService;
  let worker: ChildProcess;
  let output = '';

  const workerSpans = (): Promise<PlainSpan[]> =>
    new Promise((resolve, reject) => {
      const onMessage = (m: { spans?: PlainSpan[] }) => {
        if (!m.spans) return;
        worker.off('message', onMessage);
        resolve(m.spans);
      };
      worker.on('message', onMessage);
      if (!worker.send({ dump: true })) reject(new Error(`worker IPC closed; output:\n${output}`));
    });
  /** Waits until the worker has ended spans matching `pick` (at least `n`), and returns them. */
  const spansOf = async (pick: (s: PlainSpan) => boolean, n = 1): Promise<PlainSpan[]> => {
    let found: PlainSpan[] = [];
    await waitFor(
      async () => {
        found = (await workerSpans()).filter(pick);
        return found.length >= n;
      },
      { timeoutMs: 20_000, intervalMs: 100, message: () => `${n} worker span(s); worker output:\n${output}` },
    );
    return found;
  };
  const localSpan = (name: string) => exporter.getFinishedSpans().filter((s) => s.name === name);

  beforeAll(async () => {
    assertBuilt();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'traced' }] });
    await app.init();
    queues = app.get(QueueService);
    worker = fork(FIXTURE, [], { env: { ...process.env, DB_URL: t.db.url }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    worker.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
    worker.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
    await waitFor(() => /^ready$/m.test(output), { timeoutMs: 30_000, message: () => `worker ready; output:\n${output}` });
  });
  afterAll(async () => {
    if (worker && worker.exitCode === null) {
      const exited = new Promise((r) => worker.once('exit', r));
      worker.send({ stop: true });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 5000)))]);
      clearTimeout(timer);
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
    await app?.close();
    trace.disable();
    context.disable();
  });

  it('add() inside a span: producer span under it, the handler in a consumer span of the same trace, child of the producer span', async () => {
    const tracer = trace.getTracer('test');
    const { job, root } = await tracer.startActiveSpan('checkout', async (span) => {
      const added = await queues.add('traced', 'work', { followUp: true, progress: 50 });
      span.end();
      return { job: added, root: span.spanContext() };
    });

    const [producer] = localSpan('send traced');
    expect(producer).toBeDefined();
    expect(producer.kind).toBe(SpanKind.PRODUCER);
    expect(producer.spanContext().traceId).toBe(root.traceId);
    expect(producer.parentSpanContext?.spanId).toBe(root.spanId);
    expect(producer.attributes).toMatchObject({
      'messaging.system': 'nestjs-pg-queue',
      'messaging.destination.name': 'traced',
      'messaging.operation.type': 'send',
      'messaging.operation': 'publish',
      'messaging.message.id': job.id,
    });
    // The row holds the producer span's context, in W3C form.
    const { rows } = await t.pool.query(
      'SELECT trace FROM pgqueue.jobs WHERE id = $1 UNION ALL SELECT trace FROM pgqueue.job_history WHERE id = $1',
      [job.id],
    );
    expect(rows[0].trace).toEqual({ traceparent: `00-${root.traceId}-${producer.spanContext().spanId}-01` });

    const [consumer] = await spansOf((s) => s.name === 'process traced' && s.attributes['messaging.message.id'] === job.id);
    expect(consumer.kind).toBe(SpanKind.CONSUMER);
    expect(consumer.traceId).toBe(root.traceId);
    expect(consumer.parentSpanId).toBe(producer.spanContext().spanId);
    expect(consumer.links).toEqual([{ traceId: root.traceId, spanId: producer.spanContext().spanId }]);
    expect(consumer.attributes).toMatchObject({
      'messaging.system': 'nestjs-pg-queue',
      'messaging.destination.name': 'traced',
      'messaging.operation.type': 'process',
      'pgqueue.job.name': 'work',
      'pgqueue.job.attempt': 1,
      'pgqueue.job.outcome': 'completed',
    });
    expect(consumer.status.code).not.toBe(SpanStatusCode.ERROR);

    // The handler's own span is the consumer span's child; the job it enqueued continues the trace.
    const [inner] = await spansOf((s) => s.name === 'inner work' && s.parentSpanId === consumer.spanId);
    expect(inner.traceId).toBe(root.traceId);
    const [followProducer] = await spansOf((s) => s.name === 'send traced' && s.parentSpanId === inner.spanId);
    expect(followProducer.traceId).toBe(root.traceId);
    const [followConsumer] = await spansOf((s) => s.name === 'process traced' && s.parentSpanId === followProducer.spanId);
    expect(followConsumer.attributes['pgqueue.job.name']).toBe('follow-up');
    expect(followConsumer.traceId).toBe(root.traceId);
  });

  it('addFlow() inside a span: one producer span; every child and then the parent run in that one trace', async () => {
    const tracer = trace.getTracer('test');
    const { flow, root } = await tracer.startActiveSpan('checkout-flow', async (span) => {
      const added = await queues.addFlow({
        queue: 'traced',
        name: 'follow-up',
        payload: {},
        children: [1, 2, 3].map((i) => ({ queue: 'traced', name: 'work', payload: { i } })),
      });
      span.end();
      return { flow: added, root: span.spanContext() };
    });
    const ids = [flow.job.id, ...flow.children.map((c) => c.job.id)];
    const producers = localSpan('send traced').filter((s) => s.parentSpanContext?.spanId === root.spanId);
    expect(producers).toHaveLength(1);
    expect(producers[0].spanContext().traceId).toBe(root.traceId);
    const consumers = await spansOf(
      (s) => s.name === 'process traced' && ids.includes(String(s.attributes['messaging.message.id'])),
      ids.length,
    );
    for (const c of consumers) {
      expect(c.traceId).toBe(root.traceId);
      expect(c.parentSpanId).toBe(producers[0].spanContext().spanId);
    }
    // The parent ran after its children (it was waiting on them), still in the same trace.
    const parent = consumers.find((c) => c.attributes['messaging.message.id'] === flow.job.id);
    expect(parent?.attributes['pgqueue.job.name']).toBe('follow-up');
  });

  it('a failing handler records the exception and status ERROR on each attempt', async () => {
    const job = await queues.add('traced', 'work', { fail: true }, { attempts: 2 });
    const [producer] = localSpan('send traced').filter((s) => s.attributes['messaging.message.id'] === job.id);
    // No span was active at the add: the producer span starts a trace of its own.
    expect(producer.parentSpanContext).toBeUndefined();
    const attempts = await spansOf((s) => s.name === 'process traced' && s.attributes['messaging.message.id'] === job.id, 2);
    expect(attempts.map((s) => s.attributes['pgqueue.job.attempt']).sort()).toEqual([1, 2]);
    for (const s of attempts) {
      expect(s.traceId).toBe(producer.spanContext().traceId);
      expect(s.parentSpanId).toBe(producer.spanContext().spanId);
      expect(s.status.code).toBe(SpanStatusCode.ERROR);
      expect(s.status.message).toBe(`failing attempt ${s.attributes['pgqueue.job.attempt']}`);
      expect(s.events).toContainEqual(
        expect.objectContaining({
          name: 'exception',
          attributes: expect.objectContaining({ 'exception.message': `failing attempt ${s.attributes['pgqueue.job.attempt']}` }),
        }),
      );
    }
    expect(attempts.map((s) => s.attributes['pgqueue.job.outcome']).sort()).toEqual(['failed', 'retry']);
  });

  it('addBulk() makes one producer span with the batch size; each job is processed as its child', async () => {
    const jobs = await queues.addBulk(
      'traced',
      [1, 2, 3].map((i) => ({ name: 'work', payload: { i } })),
    );
    const [producer] = localSpan('send traced').filter((s) => s.attributes['messaging.batch.message_count'] === 3);
    expect(producer.attributes['messaging.message.id']).toBeUndefined();
    const ids = new Set(jobs.map((j) => j.id));
    const consumers = await spansOf(
      (s) => s.name === 'process traced' && ids.has(String(s.attributes['messaging.message.id'])),
      3,
    );
    for (const c of consumers) {
      expect(c.traceId).toBe(producer.spanContext().traceId);
      expect(c.parentSpanId).toBe(producer.spanContext().spanId);
    }
  });
});
