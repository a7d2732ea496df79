import { BatchError, type BatchHandlerEntry } from '../core/batch';
import { PgQueueError } from '../core/errors';
import { quote } from '../core/input-text';
import type { ClaimedRow } from '../db/job-store';
import type { AttemptEnd } from './outcome';
import type { EngineLogger } from './logger';
import type { Attempt } from './running-set';

/** What the batch runner needs of the job runner: the same steps a single job's attempt takes. */
export interface BatchAttemptSteps {
  /** The attempt starts: its `active` event, its span, its timeout timer (from the call's start). */
  begin(entry: Attempt, trace: ClaimedRow['trace']): void;
  /** The attempt ended: decide and hand on its outcome (job-runner.ts `settle`). */
  settle(entry: Attempt, end: AttemptEnd, value: unknown): void;
}

/** A claimed job waiting in its batch, with the trace context its span continues. */
interface Member {
  readonly entry: Attempt;
  readonly trace: ClaimedRow['trace'];
}

/** The jobs of one name collected for the next call, and the timer that sends a partial batch. */
interface Collecting {
  members: Member[];
  timer: NodeJS.Timeout | null;
}

/**
 * Runs `@Process({ name, batch })` handlers: collects the claimed jobs of each batch name and
 * calls the handler once per batch, when `size` jobs are there or `waitMs` after the first one,
 * then settles every job on its own through the job runner's steps, so each gets its own outcome,
 * attempt count, backoff, events and span, and its write goes through the batched completer with
 * everything else (100 outcomes make a few statements, not 100).
 *
 * A collected job is already an attempt of the running set: it holds a concurrency slot and its
 * lease is renewed by the heartbeat from its claim on, and `queue.cancel(id)` ends it cancelled
 * at once. Once the call started, a cancel cannot stop it for one job: the job's signal fires,
 * and the call decides, as a single handler does: a result completes it, an error cancels it.
 */
export class BatchRunner {
  private readonly collecting = new Map<string, Collecting>();
  /** Shutdown began: no batch starts from now on; the collected jobs go back (`takeWaiting`). */
  private held = false;

  constructor(
    private readonly queue: string,
    private readonly batches: ReadonlyMap<string, BatchHandlerEntry>,
    private readonly steps: BatchAttemptSteps,
    private readonly logger: EngineLogger,
  ) {}

  /** Whether jobs of `name` are handled in batches. */
  handles(name: string): boolean {
    return this.batches.has(name);
  }

  /** Names with a batch handler, for UnknownJobNameError's list. */
  names(): string[] {
    return [...this.batches.keys()];
  }

  /** A claimed job of a batch name: collected for the next call, which starts when the batch is full or its wait ends. */
  add(entry: Attempt, trace: ClaimedRow['trace']): void {
    const name = entry.job.name;
    const b = this.batches.get(name)!;
    let c = this.collecting.get(name);
    if (!c) this.collecting.set(name, (c = { members: [], timer: null }));
    c.members.push({ entry, trace });
    if (c.members.length >= b.batch.size) this.fire(name);
    else if (!c.timer && !this.held) {
      c.timer = setTimeout(() => this.fire(name), b.batch.waitMs);
    }
  }

  /** Takes `entry` out of the jobs collected (true) or says it is not collected (false: it runs, or never was here). */
  dropWaiting(entry: Attempt): boolean {
    const c = this.collecting.get(entry.job.name);
    const i = c ? c.members.findIndex((m) => m.entry === entry) : -1;
    if (i < 0) return false;
    c!.members.splice(i, 1);
    return true;
  }

  /** Manual mode (nestjs-pg-queue/testing): starts every collected batch now instead of after its wait. */
  startAll(): void {
    for (const name of [...this.collecting.keys()]) this.fire(name);
  }

  /** Shutdown: no collected batch starts from now on (those running go on). */
  hold(): void {
    this.held = true;
    for (const c of this.collecting.values()) if (c.timer) clearTimeout(c.timer);
  }

  /** The jobs collected but not started, removed from the batches (shutdown hands them back). */
  takeWaiting(): Attempt[] {
    const out: Attempt[] = [];
    for (const c of this.collecting.values()) {
      if (c.timer) clearTimeout(c.timer);
      for (const m of c.members) out.push(m.entry);
    }
    this.collecting.clear();
    return out;
  }

  private fire(name: string): void {
    if (this.held) return;
    const c = this.collecting.get(name);
    if (!c) return;
    if (c.timer) clearTimeout(c.timer);
    c.timer = null;
    const b = this.batches.get(name)!;
    // Settled while collected (a lease lost, shutdown's abandon): not part of the call.
    const members = c.members.splice(0, b.batch.size).filter((m) => !m.entry.settled);
    if (c.members.length) c.timer = setTimeout(() => this.fire(name), b.batch.waitMs);
    else this.collecting.delete(name);
    if (members.length) this.call(b, members);
  }

  private call(b: BatchHandlerEntry, members: Member[]): void {
    for (const m of members) this.steps.begin(m.entry, m.trace);
    const jobs = members.map((m) => m.entry.job);
    Promise.resolve()
      .then(() => b.handler(jobs))
      .then(
        (value) => this.returned(b, members, value),
        (err: unknown) => this.threw(members, err),
      );
  }

  /** The call resolved: one result per job, in order, or nothing. */
  private returned(b: BatchHandlerEntry, members: Member[], value: unknown): void {
    if (value === undefined || value === null) {
      for (const m of members) this.end(m.entry, 'returned', undefined);
    } else if (Array.isArray(value) && value.length === members.length) {
      members.forEach((m, i) => this.end(m.entry, 'returned', value[i]));
    } else {
      const got = Array.isArray(value) ? `an array of ${value.length}` : quote(value);
      const err = new PgQueueError(
        `Batch handler ${b.where} of ${quote(`${this.queue}/${members[0].entry.job.name}`)} returned ${got} for ` +
          `${members.length} job(s). Return an array of ${members.length} results (one per job, in the order received) or ` +
          'nothing; throw BatchError to fail some of them.',
      );
      for (const m of members) this.end(m.entry, 'threw', err);
    }
  }

  /** The call threw: a BatchError fails the jobs it names (the others complete); anything else fails them all. */
  private threw(members: Member[], err: unknown): void {
    if (!(err instanceof BatchError) || !(err.errors instanceof Map)) {
      for (const m of members) this.end(m.entry, 'threw', err);
      return;
    }
    const { errors, results } = err;
    const used = new Set<string | number>();
    members.forEach((m, i) => {
      const id = m.entry.job.id;
      const key = errors.has(id) ? id : errors.has(i) ? i : null;
      if (key !== null) {
        used.add(key);
        this.end(m.entry, 'threw', errors.get(key));
      } else {
        this.end(m.entry, 'returned', resultOf(results, id, i));
      }
    });
    const unknown = [...errors.keys()].filter((k) => !used.has(k));
    if (unknown.length) {
      this.logger.warn(
        `BatchError from a batch of ${quote(`${this.queue}/${members[0].entry.job.name}`)} names ${unknown.length} ` +
          `key(s) that are neither a job id of the batch nor an index below ${members.length} ` +
          `(${unknown.slice(0, 5).map(String).join(', ')}); ignored`,
      );
    }
  }

  /**
   * Settles one job of the call. A job cancelled while the call ran is settled as a single one
   * is: a result the call returned for it completes it (the work was done: a completion wins), an
   * error ends it cancelled, not retried (outcome.ts). A call that honours the cancel names the
   * job in its BatchError, with `job.signal.reason` (a CancelJobError).
   */
  private end(entry: Attempt, end: AttemptEnd, value: unknown): void {
    this.steps.settle(entry, end, value);
  }
}

/** A completed job's entry of `BatchError.results` (by position, or by id then index in a map). */
function resultOf(results: BatchError['results'], id: string, index: number): unknown {
  if (results === undefined) return undefined;
  if (Array.isArray(results)) return (results as readonly unknown[])[index];
  const map = results as ReadonlyMap<string | number, unknown>;
  return map.has(id) ? map.get(id) : map.get(index);
}
