import type { JobStore, LogAppend } from '../db/job-store';
import { PgQueuePayloadError } from '../core/errors';
import { quote } from '../core/input-text';
import type { Job } from '../core/job';

/** The caps of one job's log, as the module resolved them (`jobLogs`). */
export interface LogBufferCaps {
  readonly maxLines: number;
  readonly maxLineBytes: number;
  readonly maxBytes: number;
}

/** What `job.log()` needs of the job: who it is (the attempt that wrote the line). */
export type LoggedJob = Pick<Job, 'id' | 'queue' | 'name' | 'attempt'>;

interface Buffered {
  readonly job: LoggedJob;
  lines: string[];
  /** Lines this attempt dropped over the caps, not yet counted in the database. */
  dropped: number;
  /** Lines and bytes this attempt has handed to a write (kept or not: the database decides). */
  sentLines: number;
  sentBytes: number;
  bytes: number;
  /** This attempt dropped a line: every later one is dropped too (the first lines are kept). */
  full: boolean;
  /** The write that carries this attempt's last lines, while it is in flight. */
  writing: Promise<void> | null;
}

const ELLIPSIS = '…';

/**
 * `job.log(line)` for one worker. A call only appends to the attempt's buffer in memory (no
 * round trip, nothing to await); the buffered lines of every job of the worker are written
 * together, in one UPDATE (lib/db/job-logs.ts), at most once per `intervalMs`, and the lines of
 * an attempt that ends are written before its outcome (`flush`), so the outcome's write carries
 * them to history. One write in flight at a time: lines logged meanwhile go in the next.
 *
 * The caps keep the first lines. The buffer stops taking lines once this attempt alone reached
 * them, so a handler logging in a tight loop holds at most `maxLines` lines (`maxBytes` bytes) in
 * memory; the append statement applies the caps to the job's whole log (earlier attempts too),
 * and both count what they drop.
 *
 * Nothing is allocated for jobs that never log. Every write is guarded by (id, attempt,
 * locked_by): after a lost lease it changes nothing (and the lines are counted as unmatched).
 */
export class JobLogBuffer {
  private readonly buffered = new Map<string, Buffered>();
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  /** The write queued behind the one in flight: it takes every line buffered when it starts. */
  private queued: Promise<void> | null = null;
  private unmatchedWrites = 0;

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly intervalMs: number,
    private readonly caps: LogBufferCaps,
    private readonly onError: (err: Error) => void,
    /** Whether this attempt still runs on this worker (not settled, not abandoned). */
    private readonly isRunning: (job: LoggedJob) => boolean,
  ) {}

  /** Log writes of attempts that matched no row: the lease had been lost, or the job was gone. */
  get unmatched(): number {
    return this.unmatchedWrites;
  }

  log(job: LoggedJob, line: string): void {
    if (typeof line !== 'string') {
      throw new PgQueuePayloadError(
        `log() of job ${job.id} (${quote(`${job.queue}/${job.name}`)}): ${quote(line)} is not a string; ` +
          'pass one line of text (e.g. job.log(`fetched ${rows.length} rows`)).',
        job.queue,
        job.name,
      );
    }
    if (!this.isRunning(job)) return;
    let b = this.buffered.get(job.id);
    if (!b || b.job !== job) {
      b = { job, lines: [], dropped: 0, sentLines: 0, sentBytes: 0, bytes: 0, full: false, writing: null };
      this.buffered.set(job.id, b);
    }
    const text = this.cut(line);
    const bytes = Buffer.byteLength(text);
    if (b.full || b.sentLines + b.lines.length >= this.caps.maxLines || b.sentBytes + b.bytes + bytes > this.caps.maxBytes) {
      b.full = true;
      b.dropped++;
    } else {
      b.lines.push(text);
      b.bytes += bytes;
    }
    this.schedule();
  }

  /** A write within intervalMs, unless one is due already (a timer, or a write in flight whose end schedules the next). */
  private schedule(): void {
    if (this.timer || this.inFlight || this.queued) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.writeSoon();
    }, this.intervalMs);
    this.timer.unref();
  }

  /** A line over maxLineBytes, cut on a character boundary to that many bytes, the last being `…`. */
  private cut(line: string): string {
    const max = this.caps.maxLineBytes;
    if (line.length * 3 <= max || Buffer.byteLength(line) <= max) return line;
    const buf = Buffer.from(line);
    let end = max - Buffer.byteLength(ELLIPSIS);
    // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
    while (end > 0 && (buf[end] & 0xc0) === 0x80) end--;
    return buf.subarray(0, end).toString() + ELLIPSIS;
  }

  /** The next write: now if none is in flight, else the one queued behind it. */
  private writeSoon(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.inFlight) return this.write();
    this.queued = this.inFlight.then(() => {
      this.queued = null;
      return this.write();
    });
    return this.queued;
  }

  private write(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch: LogAppend[] = [];
    const taken: Buffered[] = [];
    for (const b of this.buffered.values()) {
      if (!b.lines.length && !b.dropped) continue;
      batch.push({ id: b.job.id, attempt: b.job.attempt, linesJson: JSON.stringify(b.lines), dropped: b.dropped });
      b.sentLines += b.lines.length;
      b.sentBytes += b.bytes;
      b.lines = [];
      b.bytes = 0;
      b.dropped = 0;
      taken.push(b);
    }
    if (!batch.length) return Promise.resolve();
    const w = this.store.logs.append(batch, this.workerId, this.caps).then(
      (written) => {
        for (const a of batch) if (!written.has(a.id)) this.unmatchedWrites++;
      },
      (err: Error) =>
        this.onError(new Error(`Writing the logs of ${batch.length} job(s) failed: ${err.message}`, { cause: err })),
    );
    const done = w.finally(() => {
      this.inFlight = null;
      for (const b of taken) if (b.writing === done) b.writing = null;
      for (const b of this.buffered.values()) {
        if (b.lines.length || b.dropped) {
          this.schedule();
          break;
        }
      }
    });
    this.inFlight = done;
    for (const b of taken) b.writing = done;
    return done;
  }

  /**
   * The attempt settled: its buffered lines are written now (with those of the worker's other
   * jobs), after any write in flight, so the outcome written next carries them. Null when it has
   * nothing to write or wait for; otherwise resolves once written (or failed: never rejects).
   */
  flush(job: LoggedJob): Promise<void> | null {
    const b = this.buffered.get(job.id);
    if (!b || b.job !== job) return null;
    this.buffered.delete(job.id);
    if (b.lines.length || b.dropped) {
      // Back in the map until the write takes it: the write reads the map.
      this.buffered.set(job.id, b);
      const next = this.writeSoon();
      return next.then(() => {
        if (this.buffered.get(job.id) === b) this.buffered.delete(job.id);
      });
    }
    return b.writing;
  }

  /** Shutdown abandoned these attempts: their unwritten lines are dropped, those written stay. */
  forgetAll(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.buffered.clear();
  }
}
