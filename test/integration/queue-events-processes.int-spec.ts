import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Injectable } from '@nestjs/common';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { JobFinishedWithError, OnQueueEvent, QueueService, type Job, type JobAttemptError } from '../../lib';
import { bootApp } from '../support/app';
import { assertBuilt } from '../support/built';
import { useTestDatabase, waitFor } from '../support/database';

// Issue 28's "done when", in two OS processes: a producer-only Nest app (workers: false, this
// process) enqueues an export, awaits its result and hears it complete through @OnQueueEvent,
// while a separate worker process (test/fixtures/events-worker-process.js, the BUILT package:
// `npm run build` first) runs it.

const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'events-worker-process.js');

const heard: string[] = [];

@Injectable()
class ExportNotifier {
  @OnQueueEvent('completed', { queue: 'exports' })
  ready(job: Job, result: { file: string }) {
    heard.push(`completed:${job.id}:${result.file}`);
  }

  @OnQueueEvent('failed')
  failed(job: Job, error: JobAttemptError) {
    heard.push(`failed:${job.id}:${error.message}`);
  }

  @OnQueueEvent('progress', { queue: 'exports' })
  progress(job: Job, value: unknown) {
    heard.push(`progress:${job.id}:${JSON.stringify(value)}`);
  }
}

describe('events across OS processes', () => {
  const t = useTestDatabase();
  let producer: INestApplicationContext;
  let worker: ChildProcess | null = null;
  let output = '';

  beforeAll(async () => {
    assertBuilt();
    producer = await bootApp({
      options: { connection: t.db.url, workers: false },
      queues: [{ name: 'exports' }],
      providers: [ExportNotifier],
    });
  });
  afterAll(async () => {
    if (worker && worker.exitCode === null) {
      const exited = new Promise((resolve) => worker!.once('exit', resolve));
      worker.kill('SIGTERM');
      await exited;
    }
    await producer?.close();
  });

  it('a producer-only app awaits an export run by a worker process and hears it complete, fail and progress', async () => {
    const queues = producer.get(QueueService);
    // Enqueued before the worker process exists: the wait subscribes, reads "waiting", then hears the end.
    const job = await queues.add('exports', 'export', { name: 'tenant-7' });
    const broken = await queues.add('exports', 'broken', {});
    const result = job.waitUntilFinished({ timeoutMs: 20_000 });
    const failure = broken.waitUntilFinished({ timeoutMs: 20_000 }).catch((e: unknown) => e);

    worker = spawn(process.execPath, [FIXTURE], {
      cwd: ROOT,
      env: { ...process.env, DB_URL: t.db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    worker.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
    worker.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));

    const out = (await result) as { file: string; pid: number };
    expect(out.file).toBe('tenant-7.csv');
    expect(out.pid).toBe(worker.pid);
    const err = await failure;
    expect(err).toBeInstanceOf(JobFinishedWithError);
    expect((err as JobFinishedWithError).lastError?.message).toBe('disk full');

    await waitFor(
      () =>
        heard.includes(`completed:${job.id}:tenant-7.csv`) &&
        heard.includes(`failed:${broken.id}:disk full`) &&
        heard.includes(`progress:${job.id}:50`),
      { timeoutMs: 20_000, message: () => `the three events; heard ${JSON.stringify(heard)}; worker output:\n${output}` },
    );
  });
});
