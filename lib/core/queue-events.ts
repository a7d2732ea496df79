import { PgQueueError } from './errors';
import type { Job, JobAttemptError, JobProgress, JobState } from './job';

/**
 * What the outcome statements publish, as the events channel spells it (`kind|queue|ids`).
 * `deadLettered`, `stalled` and `released` are published as themselves; the rest carry BullMQ's
 * names. `released` (a flow parent's dependencies all ended: waiting-children -> waiting) and a
 * parent's `failed` by its child come from the flow trigger (migration 0016).
 */
export type QueueEventKind =
  'completed' | 'failed' | 'retrying' | 'cancelled' | 'snoozed' | 'deadLettered' | 'stalled' | 'progress' | 'released' | 'parked';

/** Every kind of cross-process event, in one list (the decorator and the parser check against it). */
export const QUEUE_EVENT_KINDS: readonly QueueEventKind[] = [
  'completed',
  'failed',
  'retrying',
  'cancelled',
  'snoozed',
  'deadLettered',
  'stalled',
  'progress',
  'released',
  'parked',
];

/**
 * What a slow listener is told instead of silently losing events: how many it missed, the first
 * ids of them, and over what time. The events are gone; read the jobs (`getJobs`) if you need them.
 */
export interface LaggedEvent {
  /** Events dropped since the previous `lagged` (or the subscription). */
  readonly missed: number;
  /** The ids of the first of them (at most 100). */
  readonly ids: readonly string[];
  /** When the first was dropped. */
  readonly since: Date;
  /** When the last was dropped. */
  readonly until: Date;
}

/**
 * The cross-process events (`queueEvents(queue).on(...)`, `@OnQueueEvent`): published by the
 * statement that wrote the outcome, on any node, heard by every process that listens, and fired
 * only once the listener has read the row and it says the same. The job is as the database has
 * it at that read (a later transition may already show).
 */
export interface QueueEventMap {
  /** The job completed; `result` is what its handler returned (read from history). */
  completed: [job: Job, result: unknown];
  /** The job failed for good (no attempts left, or an UnrecoverableError): its last error. */
  failed: [job: Job, error: JobAttemptError];
  /** An attempt failed and another is scheduled: that attempt's error. BullMQ's worker `failed` fires here too. */
  retrying: [job: Job, error: JobAttemptError];
  /** The job ended cancelled (queue.cancel, or its handler threw CancelJobError). */
  cancelled: [job: Job, error: JobAttemptError];
  /** The handler threw SnoozeJobError: the job waits again, the attempt not counted. */
  snoozed: [job: Job];
  /** The job's last attempt failed and it moved to its queue's dead-letter queue (`job.queue` is that queue now). */
  deadLettered: [job: Job, error: JobAttemptError];
  /** The rescuer found the job's lease expired: it retries, or failed if that was its last attempt. */
  stalled: [job: Job, error: JobAttemptError];
  /** A handler reported progress (written at most once per `progressIntervalMs`): the value stored. */
  progress: [job: Job, progress: JobProgress];
  /**
   * A job that waited on its children or dependencies (`waiting-children`) had them all end and
   * became claimable. Only such a release publishes it, never an add (BullMQ's `waiting` with
   * prev 'waiting-children'). The job may be further along when read (active, or finished).
   */
  released: [job: Job];
  /**
   * The job was parked by `job.sleep()` or `job.waitFor()`: handed back to the queue without a
   * worker, the attempt not counted, until its wake time or its signal (`queue.getJobSteps(id)`
   * says on which step). No worker event fires for a park: it is not an outcome.
   */
  parked: [job: Job];
  /** This subscription fell behind and dropped events: which, and how many. */
  lagged: [lag: LaggedEvent];
}

/** A cross-process event name (`QueueEventMap`'s keys). */
export type QueueEventName = keyof QueueEventMap;

/** One event as the async iterator yields it. */
export type QueueEvent = {
  [K in QueueEventName]: { readonly event: K; readonly args: QueueEventMap[K] };
}[QueueEventName];

/**
 * The cross-process events of one queue, in any process (workers or not). Nothing is listened
 * to until a first `on` or iterator; `close()` ends them (the module closes every one at shutdown).
 * @example
 * const events = queue.events();
 * events.on('completed', (job, result) => notify(job.id, result));
 * for await (const e of events) if (e.event === 'failed') alert(e.args[0]);
 */
export interface QueueEvents extends AsyncIterable<QueueEvent> {
  /** The queue these events are of. */
  readonly queue: string;
  /** Calls `listener` on each `event` of this queue. A listener that throws is logged; the others still run. */
  on<K extends QueueEventName>(event: K, listener: (...args: QueueEventMap[K]) => unknown): this;
  /** Removes a listener `on` added. */
  off<K extends QueueEventName>(event: K, listener: (...args: QueueEventMap[K]) => unknown): this;
  /**
   * An async iterator of every event of this queue, from now on. It buffers at most
   * `bufferSize` events (default 1000): past that it drops the oldest and yields a `lagged`.
   */
  iterate(opts?: { bufferSize?: number }): AsyncIterableIterator<QueueEvent>;
  /**
   * Resolves once this subscription's LISTEN is active: every event committed after that is heard
   * (an event committed before it is not replayed). BullMQ's `queueEvents.waitUntilReady()`.
   * `@OnQueueEvent` methods are ready when the app's boot returns. Rejects when the subscription
   * is closed first, or after `timeoutMs`.
   */
  waitUntilReady(opts?: { timeoutMs?: number }): Promise<void>;
  /** Stops listening (its iterators end); idempotent. */
  close(): Promise<void>;
}

/** Options of `job.waitUntilFinished()` and `queue.waitForJob()`. */
export interface WaitForJobOptions {
  /** Reject with a WaitForJobTimeoutError after this long. @default undefined (wait as long as it takes) */
  readonly timeoutMs?: number;
}

/** A job added by `add()`: a Job you can also wait on. */
export type AddedJob<TPayload = unknown, TResult = unknown> = Job<TPayload, TResult> & {
  /**
   * Resolves with the job's result once it completed (in any process); rejects with a
   * JobFinishedWithError when it failed or was cancelled, or a WaitForJobTimeoutError after
   * `timeoutMs`. BullMQ's `job.waitUntilFinished(queueEvents, ttl)`; no QueueEvents to pass.
   */
  waitUntilFinished(opts?: WaitForJobOptions): Promise<TResult>;
};

/**
 * `waitUntilFinished` / `waitForJob`: the job ended failed or cancelled. `lastError` is its last
 * attempt's error (the handler's message), `job` the finished job.
 */
export class JobFinishedWithError extends PgQueueError {
  constructor(
    readonly job: Job,
    readonly state: Extract<JobState, 'failed' | 'cancelled'>,
    readonly lastError: JobAttemptError | null,
  ) {
    super(
      `Job ${job.id} (${job.queue}/${job.name}) ended ${state}` +
        (lastError ? `: ${lastError.name}: ${lastError.message}` : '') +
        '. The job and its errors are on `error.job`.',
    );
  }
}

/** `waitUntilFinished` / `waitForJob`: the job had not finished within `timeoutMs` (it goes on; only the wait ended). */
export class WaitForJobTimeoutError extends PgQueueError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
  ) {
    super(
      `Job ${jobId} had not finished after ${timeoutMs} ms of waiting (it may still run: only the wait ended). Raise timeoutMs, or wait again.`,
    );
  }
}

/** `waitForJob`: no job of that id in the queue, live or in history (never added, removed, or pruned by retention). */
export class JobNotFoundError extends PgQueueError {
  constructor(
    readonly jobId: string,
    readonly queue: string,
  ) {
    super(
      `No job ${jobId} in queue "${queue}", live or in history: never added, removed, or pruned by retention ` +
        '(retention.completedMs = 0 keeps no completed job, so its result cannot be waited for).',
    );
  }
}

/** What a Queue needs to wait for its jobs and hear its events: the events hub of its database, set by the module. */
export interface QueueEventsSource {
  /** A new subscription to `queue`'s events. */
  events(queue: string): QueueEvents;
  /** Waits for job `id` of `queue` to finish (see AddedJob.waitUntilFinished). */
  waitForJob<R>(queue: string, id: string, opts: WaitForJobOptions | undefined): Promise<R>;
}
