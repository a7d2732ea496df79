import 'reflect-metadata';
import { BatchError, Process, PgQueueConfigError, type ActiveJob, type Job } from '../../lib';
import { resolveBatchOptions, type BatchHandlerEntry } from '../../lib/core/batch';
import { CancelJobError, PgQueueError } from '../../lib/core/errors';
import { PROCESS_METADATA } from '../../lib/core/tokens';
import { RunningJob } from '../../lib/worker/active-job';
import { BatchRunner } from '../../lib/worker/batch-runner';
import type { AttemptEnd } from '../../lib/worker/outcome';
import { Attempt } from '../../lib/worker/running-set';
import { claimedRow } from '../support/job-row';

// The batch runner's settling (lib/worker/batch-runner.ts) without a database: which end each job
// of a call gets. The integration suite (batch-handlers.int-spec.ts) checks the rows it leads to.

const BACKOFF = { type: 'fixed', delayMs: 0, maxDelayMs: 0, jitter: false } as const;

function attempt(id: number): Attempt {
  const row = claimedRow({ id: String(id), payload: { id } });
  return new Attempt(new RunningJob(row, 'mail'), BACKOFF, row.started_at_ms);
}

/** Runs one call of `handler` over jobs 1..n; resolves with each job's end, in order. */
async function runBatch(
  n: number,
  handler: (jobs: ActiveJob[]) => unknown,
  before: (entries: Attempt[]) => void = () => undefined,
): Promise<{ ends: [string, AttemptEnd, unknown][]; warnings: string[]; begun: string[] }> {
  const ends: [string, AttemptEnd, unknown][] = [];
  const warnings: string[] = [];
  const begun: string[] = [];
  const entries = Array.from({ length: n }, (_, i) => attempt(i + 1));
  const batches = new Map<string, BatchHandlerEntry>([
    ['send', { handler: handler as BatchHandlerEntry['handler'], batch: { size: n, waitMs: 60_000 }, where: 'P.send' }],
  ]);
  let settled!: () => void;
  const done = new Promise<void>((r) => (settled = r));
  const runner = new BatchRunner(
    'mail',
    batches,
    {
      begin: (e) => begun.push(e.job.id),
      settle: (e, end, value) => {
        ends.push([e.job.id, end, value]);
        if (ends.length === n) settled();
      },
    },
    { log: () => undefined, warn: (m) => warnings.push(m), error: () => undefined },
  );
  before(entries);
  // The n-th job fills the batch: the call starts at once, not after waitMs.
  for (const e of entries) runner.add(e, null);
  await done;
  return { ends, warnings, begun };
}

describe('batch runner: each job of a call settles on its own', () => {
  it('an array of results gives each job its own, in order; nothing completes them all with no result', async () => {
    expect((await runBatch(3, (jobs) => jobs.map((j) => `r${j.id}`))).ends).toEqual([
      ['1', 'returned', 'r1'],
      ['2', 'returned', 'r2'],
      ['3', 'returned', 'r3'],
    ]);
    expect((await runBatch(2, () => undefined)).ends).toEqual([
      ['1', 'returned', undefined],
      ['2', 'returned', undefined],
    ]);
  });

  it('starts every job of the call (its event, span and timeout) before the handler runs', async () => {
    const seen: string[][] = [];
    const r = await runBatch(3, (jobs) => void seen.push(jobs.map((j) => j.id)));
    expect(r.begun).toEqual(['1', '2', '3']);
    expect(seen).toEqual([['1', '2', '3']]);
  });

  it('an array of the wrong length, or another value, fails every job, saying what to return', async () => {
    const { ends } = await runBatch(3, () => [1, 2]);
    expect(ends.map(([, end]) => end)).toEqual(['threw', 'threw', 'threw']);
    expect(ends[0][2]).toBeInstanceOf(PgQueueError);
    expect((ends[0][2] as Error).message).toMatch(/returned an array of 2 for 3 job\(s\)\. Return an array of 3 results/);
    expect((await runBatch(1, () => 'ok')).ends[0][1]).toBe('threw');
  });

  it('BatchError fails the jobs it names, by id or by index, and completes the others with their results', async () => {
    const boom = new Error('boom');
    const snooze = new Error('later');
    const { ends, warnings } = await runBatch(4, (jobs) => {
      throw new BatchError(
        new Map<string | number, unknown>([
          [jobs[1].id, boom],
          [3, snooze],
          ['999', new Error('not in the batch')],
        ]),
        { results: ['a', 'b', 'c', 'd'] },
      );
    });
    expect(ends).toEqual([
      ['1', 'returned', 'a'],
      ['2', 'threw', boom],
      ['3', 'returned', 'c'],
      ['4', 'threw', snooze],
    ]);
    expect(warnings).toEqual([expect.stringContaining('names 1 key(s) that are neither a job id of the batch')]);
  });

  it('BatchError results may be a map by job id', async () => {
    const { ends } = await runBatch(2, (jobs) => {
      throw new BatchError(new Map([[0, new Error('x')]]), { results: new Map(jobs.map((j) => [j.id, `id ${j.id}`])) });
    });
    expect(ends.map(([id, end, v]) => [id, end, end === 'returned' ? v : 'error'])).toEqual([
      ['1', 'threw', 'error'],
      ['2', 'returned', 'id 2'],
    ]);
  });

  it('any other error fails every job with it', async () => {
    const err = new TypeError('down');
    const { ends } = await runBatch(2, () => Promise.reject(err));
    expect(ends).toEqual([
      ['1', 'threw', err],
      ['2', 'threw', err],
    ]);
  });

  it('a job cancelled while its call ran is settled as a single one: a result completes it, a BatchError entry cancels it', async () => {
    const completes = await runBatch(
      2,
      (jobs) => jobs.map((j) => j.id),
      (entries) => (entries[0].cancelRequested = true),
    );
    // The runner hands on what the call said; outcome.ts lets a completion win, as for a single handler.
    expect(completes.ends).toEqual([
      ['1', 'returned', '1'],
      ['2', 'returned', '2'],
    ]);
    const cancel = new CancelJobError('honoured');
    const honours = await runBatch(
      2,
      (jobs) => {
        throw new BatchError(new Map([[jobs[0].id, cancel]]), { results: jobs.map((j) => j.id) });
      },
      (entries) => (entries[0].cancelRequested = true),
    );
    expect(honours.ends).toEqual([
      ['1', 'threw', cancel],
      ['2', 'returned', '2'],
    ]);
  });

  it('a collected job can be dropped (cancel before the call); shutdown takes the rest back unstarted', () => {
    const batches = new Map<string, BatchHandlerEntry>([
      ['send', { handler: () => undefined, batch: { size: 10, waitMs: 60_000 }, where: 'P.send' }],
    ]);
    const begun: string[] = [];
    const runner = new BatchRunner('mail', batches, { begin: (e) => begun.push(e.job.id), settle: () => undefined }, console);
    const [a, b, c] = [attempt(1), attempt(2), attempt(3)];
    for (const e of [a, b, c]) runner.add(e, null);
    expect(runner.dropWaiting(b)).toBe(true);
    expect(runner.dropWaiting(b)).toBe(false);
    runner.hold();
    runner.startAll(); // held: nothing starts
    expect(begun).toEqual([]);
    expect(runner.takeWaiting()).toEqual([a, c]);
  });
});

describe('@Process({ batch }) options', () => {
  it('defaults waitMs to 0 and refuses bad values with a message naming the job', () => {
    expect(resolveBatchOptions({ size: 100 }, 'send')).toEqual({ size: 100, waitMs: 0 });
    expect(resolveBatchOptions({ size: 1, waitMs: 50 }, 'send')).toEqual({ size: 1, waitMs: 50 });
    for (const [bad, msg] of [
      [{ size: 0 }, /batch\.size must be a whole number from 1 to 1000 .*got 0/],
      [{ size: 2.5 }, /batch\.size must be a whole number/],
      [{ size: 1001 }, /batch\.size must be a whole number from 1 to 1000/],
      [{ size: 10, waitMs: -1 }, /batch\.waitMs must be a whole number of milliseconds from 0 to 60000, got -1/],
      [{ size: 10, wait: 5 }, /unknown batch option "wait" \(use waitMs\)/],
      [10, /batch must be an object such as \{ size: 100, waitMs: 50 \}/],
    ] as const) {
      expect(() => resolveBatchOptions(bad, 'send')).toThrow(PgQueueConfigError);
      expect(() => resolveBatchOptions(bad, 'send')).toThrow(msg);
    }
  });

  it('stores the resolved batch with the handler; a batch needs a name', () => {
    class P {
      @Process({ name: 'send', batch: { size: 5 } })
      send(jobs: ActiveJob<{ to: string }>[]) {
        return jobs.map((j) => j.payload.to);
      }

      // Job<T>[] works as well as ActiveJob<T>[].
      @Process({ name: 'plain', batch: { size: 5, waitMs: 10 } })
      plain(jobs: Job[]) {
        return jobs.length;
      }
    }
    expect(Reflect.getMetadata(PROCESS_METADATA, P.prototype.send)).toEqual({ name: 'send', batch: { size: 5, waitMs: 0 } });
    expect(() => Process({ batch: { size: 5 } } as never)).toThrow(/@Process\(\{ batch \}\) needs a name/);
    expect(() => Process({ name: 'x', batchSize: 5 } as never)).toThrow(
      /unknown option "batchSize" \(use batch: \{ size, waitMs\? \}\)/,
    );
  });

  it('does not compile a batch handler whose method takes one job (a type-level check)', () => {
    class P {
      // @ts-expect-error: with batch the method receives ActiveJob[]; a method of one job is refused.
      @Process({ name: 'one', batch: { size: 5 } })
      one(job: ActiveJob<{ to: string }>) {
        return job.payload.to;
      }
    }
    expect(P).toBeDefined();
  });
});
