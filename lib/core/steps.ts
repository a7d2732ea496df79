import { PgQueueError } from './errors';
import type { TransactionManager } from './transaction-types';
import type { PgPoolClient } from './pg-types';

/** What every step's function receives. */
export interface StepContext {
  /**
   * `${jobId}:${stepName}`, the same on every run of this step of this job: pass it to an API
   * that deduplicates by key (Stripe's `Idempotency-Key`, say), so a step that runs twice (its
   * worker died after the call, before the record) has the effect once.
   */
  readonly idempotencyKey: string;
  /** The attempt running the step (1-based). */
  readonly attempt: number;
}

/**
 * What a transactional step's function receives (`{ transaction: true }`). `M` is the type of
 * `manager`: annotate the parameter to get TypeORM's, e.g.
 * `async ({ manager }: TransactionalStepContext<EntityManager>) => ...`.
 */
export interface TransactionalStepContext<M = TransactionManager> extends StepContext {
  /**
   * A node-postgres client inside the step's transaction: write with it, and the step's record
   * commits in the same transaction, so your writes and the record commit together or not at
   * all. Do not COMMIT or ROLLBACK it; throw to roll back. In an app whose queue connection comes
   * from a TypeORM DataSource, it is the connection under `manager` (one transaction for both).
   */
  readonly client: PgPoolClient;
  /**
   * A TypeORM `EntityManager` of `dataSource.transaction(...)` on the app's own DataSource (the
   * one the queue's connection comes from: `forRoot({ dataSource })`, or the app's default
   * DataSource): your entity writes and the step's record commit together or not at all.
   * Reading it in an app whose queue has no DataSource (`connection` given) throws
   * `PgQueueConfigError`, saying what to configure; use `client` there.
   */
  readonly manager: M;
}

/** Options of `job.step()`. */
export interface StepOptions {
  /**
   * Run the function in a transaction on the queue's database (its context has `client`, and
   * `manager` when the queue's connection comes from a TypeORM DataSource), and record the step
   * in that transaction: exactly one committed run of it, whatever crashes.
   * @default false (the function runs as is; it is recorded after it returns: at least once)
   */
  readonly transaction?: boolean;
}

/** Options of `job.waitFor()`. */
export interface WaitForOptions {
  /**
   * Give up after this long (from the first time the job reached the wait): the handler resumes
   * and `waitFor` throws `WaitTimeoutError`. @default undefined (waits for ever)
   */
  readonly timeoutMs?: number;
}

/** The durable steps of a running job (docs/steps.md). */
export interface DurableSteps {
  /**
   * Runs `fn` once for this job and records its JSON result: a later attempt (a retry, a rescue
   * after a crash, a resume after `sleep` or `waitFor`) returns the recorded result without
   * running it. Names are unique per run. A step that throws fails the attempt (retried with the
   * job's backoff); the next attempt runs it again. What it returns is stored as JSON and comes
   * back as JSON would (a `Date` as a string), on the first run as on later ones.
   * @example const charge = await job.step('charge', ({ idempotencyKey }) => stripe.charge(order, { idempotencyKey }));
   */
  step<T>(name: string, fn: (ctx: StepContext) => Promise<T> | T, options?: { readonly transaction?: false }): Promise<T>;
  /**
   * A transactional step: `fn` runs in a transaction on the queue's database (on the app's
   * TypeORM DataSource when the queue's connection comes from one: its context then has
   * `manager`), and the step is recorded in that same transaction.
   * @example await job.step('reserve', ({ manager }: TransactionalStepContext<EntityManager>) => manager.insert(Order, order), { transaction: true });
   * @example await job.step('reserve', ({ client }) => client.query('UPDATE stock SET n = n - 1 WHERE sku = $1', [sku]), { transaction: true });
   */
  step<T, M = TransactionManager>(
    name: string,
    fn: (ctx: TransactionalStepContext<M>) => Promise<T> | T,
    options: { readonly transaction: true },
  ): Promise<T>;
  /**
   * Sleeps durably: ends the attempt without counting it, frees the worker, and the job runs
   * again once `msOrUntil` has passed; the steps recorded before are skipped, and `sleep`
   * returns. For minutes or months.
   * @example await job.sleep('cool-off', 24 * 3_600_000);
   */
  sleep(name: string, msOrUntil: number | Date): Promise<void>;
  /**
   * Parks the job until `queue.signal(job.id, name, payload)` (or the timeout), without a
   * worker; resolves to the payload. A signal sent before the job reaches the wait is kept for it.
   * @throws WaitTimeoutError when the timeout passed first (at the resume after it).
   */
  waitFor<T = unknown>(name: string, options?: WaitForOptions): Promise<T>;
}

/** One recorded step of a job, as `queue.getJobSteps(id)` returns it. */
export interface JobStep {
  /** The name the handler gave it: its identity across runs. */
  readonly name: string;
  /** `step` (job.step), `sleep` (job.sleep) or `wait` (job.waitFor). */
  readonly kind: 'step' | 'sleep' | 'wait';
  /**
   * `done` (its result is recorded; a sleep whose time has come), `sleeping`, `waiting` (for its
   * signal), `timed-out` (a wait whose timeout came first).
   */
  readonly status: 'done' | 'sleeping' | 'waiting' | 'timed-out';
  /** What the step returned, or the signal's payload (JSON); undefined when none. */
  readonly result: unknown;
  /** The attempt that recorded it; null for a signal sent before the job reached its wait. */
  readonly attempt: number | null;
  /** When the step started (a step: its function; a sleep or wait: when the job parked). */
  readonly startedAt: Date | null;
  /** When it was recorded (a step: its function's end; a signal: when it came). */
  readonly finishedAt: Date | null;
  /** A sleep's end, or a wait's timeout; null for none. */
  readonly wakeAt: Date | null;
}

/**
 * Thrown by `job.sleep()` and `job.waitFor()` once the job is parked: it unwinds the handler,
 * which must let it through (a `catch` that swallows it is harmless, the job stays parked, but
 * nothing after it runs now: every step call throws it again).
 */
export class JobParkedError extends PgQueueError {
  constructor(
    readonly jobId: string,
    readonly step: string,
  ) {
    super(`Job ${jobId} is parked at ${JSON.stringify(step)}; let this error through (the job resumes later).`);
  }
}

/** `job.waitFor()` ended without its signal: the timeout passed first. */
export class WaitTimeoutError extends PgQueueError {
  constructor(
    readonly jobId: string,
    readonly step: string,
    readonly timeoutMs: number | null,
  ) {
    super(`Job ${jobId} waited for ${JSON.stringify(step)} past its timeout; no signal came.`);
  }
}

/** A step misused: a name used twice in one run, a name given to another kind of step, a bad value. */
export class StepError extends PgQueueError {
  constructor(
    readonly jobId: string,
    readonly step: string,
    message: string,
  ) {
    super(message);
  }
}

/** One recorded step of a job as the database holds it (migrations/0018_steps.sql). @internal */
export interface RecordedStep {
  readonly name: string;
  /** Its position in the run that recorded it (0-based); null for a signal that came before its wait. */
  readonly seq: number | null;
  readonly kind: 'step' | 'sleep' | 'wait';
  readonly status: 'done' | 'sleeping' | 'waiting' | 'timed-out';
  /** The recorded JSON result (a wait's: the signal's payload); undefined when none was recorded. */
  readonly result: unknown;
  /** The attempt that recorded it; null for a signal that came before its wait. */
  readonly attempt: number | null;
  readonly startedAtMs: number | null;
  readonly finishedAtMs: number | null;
  /** A sleep's end, or a wait's timeout (null: none). */
  readonly wakeAtMs: number | null;
}

/** A job's recorded steps, oldest first, and the database's clock when they were read. @internal */
export interface RecordedJobSteps {
  readonly nowMs: number;
  readonly steps: RecordedStep[];
}
