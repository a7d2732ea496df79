import type { JobStore } from '../db/job-store';
import { toJsonText } from '../db/jsonb';
import { PgQueuePayloadError } from '../core/errors';
import { quote } from '../core/input-text';
import type { Job, JobProgress } from '../core/job';

/** The job whose progress is tracked: a running attempt. */
export interface ProgressJob extends Job {
  /** Set by the tracker: what `job.progress` reads from now on. */
  setProgress(value: JobProgress): void;
}

/** What the tracker tells its worker. */
export interface ProgressEvents {
  progress(job: Job, value: JobProgress): void;
  error(err: Error): void;
}

interface Tracked {
  readonly job: ProgressJob;
  /** JSON of the latest value not yet written, or null. */
  latest: string | null;
  writing: Promise<void> | null;
  timer: NodeJS.Timeout | null;
  lastWriteAt: number;
  /** The attempt settled: the final write is the flush's, no timer may start another. */
  ended: boolean;
}

/**
 * `job.updateProgress()` for one worker. Each call validates the value, sets `job.progress`
 * and fires the `progress` event at once; the database write is throttled per job to one per
 * `intervalMs`, one at a time: the first call writes at once, later ones within the interval
 * only replace the value a timer writes when it ends (trailing write). So a loop of 10,000 calls
 * within one interval makes 2 UPDATEs, and a job reporting steadily for T ms at most
 * T / intervalMs + 2. Before the attempt's outcome is written the worker calls `flush`, which
 * writes the latest value if it is not written yet (at most one more UPDATE): the outcome then
 * carries it into history.
 *
 * Nothing is allocated for jobs that never report progress: the state is made on the first call.
 * Every write is guarded by (id, attempt, locked_by): after a lost lease it changes nothing.
 */
export class ProgressTracker {
  private readonly tracked = new Map<string, Tracked>();
  private unmatchedWrites = 0;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly intervalMs: number,
    private readonly maxBytes: number,
    private readonly events: ProgressEvents,
    /** Whether this attempt still runs on this worker (not settled, not abandoned). */
    private readonly isRunning: (job: ProgressJob) => boolean,
  ) {}

  /** Progress writes that matched no row: the lease had been lost, or the job was gone. */
  get unmatched(): number {
    return this.unmatchedWrites;
  }

  update(job: ProgressJob, value: JobProgress): Promise<void> {
    if (!this.isRunning(job)) return Promise.resolve();
    let json: string;
    try {
      json = this.toJson(job, value);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    // What getJob would read back: a copy, so later changes to the caller's object do not show.
    const stored = typeof value === 'number' ? value : (JSON.parse(json) as JobProgress);
    job.setProgress(stored);
    try {
      this.events.progress(job, stored);
    } catch (err) {
      this.events.error(err as Error);
    }
    let t = this.tracked.get(job.id);
    if (!t || t.job !== job) {
      t = { job, latest: null, writing: null, timer: null, lastWriteAt: -Infinity, ended: false };
      this.tracked.set(job.id, t);
    }
    t.latest = json;
    this.schedule(t);
    return Promise.resolve();
  }

  private toJson(job: ProgressJob, value: unknown): string {
    const where = `updateProgress() of job ${job.id} (${quote(`${job.queue}/${job.name}`)})`;
    const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
    if (!(typeof value === 'number' && Number.isFinite(value)) && !isObject) {
      throw new PgQueuePayloadError(
        `${where}: ${quote(value)} is not a progress value; pass a finite number (e.g. 42) or a JSON object (e.g. { done: 4, total: 10 }).`,
        job.queue,
        job.name,
      );
    }
    let json: string;
    try {
      json = toJsonText(value, 'progress');
    } catch (err) {
      throw new PgQueuePayloadError(
        `${where}: the value cannot be stored as JSON: ${(err as Error).message}.`,
        job.queue,
        job.name,
        {
          cause: err,
        },
      );
    }
    const bytes = json.length * 3 <= this.maxBytes ? 0 : Buffer.byteLength(json);
    if (bytes > this.maxBytes) {
      throw new PgQueuePayloadError(
        `${where}: the value is ${bytes} bytes of JSON, over maxProgressBytes (${this.maxBytes}). Report a small summary ` +
          '(counts, a percentage, a stage name), or raise maxProgressBytes in PgQueueModule.forRoot().',
        job.queue,
        job.name,
      );
    }
    return json;
  }

  /** A write now if the interval allows and none is in flight; else a timer (or the write in flight) takes the latest. */
  private schedule(t: Tracked): void {
    if (t.writing || t.timer || t.ended) return;
    const wait = t.lastWriteAt + this.intervalMs - Date.now();
    if (wait <= 0) {
      this.write(t);
      return;
    }
    t.timer = setTimeout(() => {
      t.timer = null;
      if (!t.ended) this.write(t);
    }, wait);
    t.timer.unref();
  }

  private write(t: Tracked): Promise<void> {
    const json = t.latest;
    if (json === null) return Promise.resolve();
    t.latest = null;
    t.lastWriteAt = Date.now();
    const { job } = t;
    const w = this.store.setProgressIfRunning(job.id, job.attempt, this.workerId, json).then(
      (matched) => {
        if (!matched) this.unmatchedWrites++;
      },
      (err: Error) =>
        this.events.error(new Error(`Writing the progress of job ${job.id} failed: ${err.message}`, { cause: err })),
    );
    t.writing = w.finally(() => {
      t.writing = null;
      if (t.latest !== null) this.schedule(t);
    });
    return t.writing;
  }

  /**
   * The attempt settled: writes its latest value now if it is not written yet (after any write
   * in flight), so the outcome written next carries it. Null when the job reported no progress
   * (nothing to wait for); otherwise resolves once written (or failed: never rejects).
   */
  flush(job: ProgressJob): Promise<void> | null {
    const t = this.tracked.get(job.id);
    if (!t || t.job !== job) return null;
    t.ended = true;
    if (t.timer) clearTimeout(t.timer);
    t.timer = null;
    this.tracked.delete(job.id);
    if (!t.writing && t.latest === null) return null;
    return (async () => {
      while (t.writing) await t.writing;
      if (t.latest !== null) await this.write(t);
    })();
  }

  /** Shutdown abandoned these attempts: their timers stop, the values last written stay. */
  forgetAll(): void {
    for (const t of this.tracked.values()) {
      t.ended = true;
      if (t.timer) clearTimeout(t.timer);
    }
    this.tracked.clear();
  }
}
