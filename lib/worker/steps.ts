import type { JobStore } from '../db/job-store';
import type { StepRow } from '../db/steps';
import { toJsonText } from '../db/jsonb';
import { managerExecutor, type SqlExecutor } from '../db/executor';
import { LeaseLostError, PgQueueConfigError, PgQueuePayloadError } from '../core/errors';
import type { TransactionManager } from '../core/job';
import type { PgPoolClient } from '../core/pg-types';
import { quote } from '../core/input-text';
import { JobParkedError, StepError, WaitTimeoutError, type StepOptions } from '../core/steps';
import type { TransactionalStepContext } from '../core/steps';
import type { RunningJob, StepHost } from './active-job';
import type { EngineLogger } from './logger';
import { MAX_DELAY_MS } from './outcome';

/**
 * Runs `fn` in a transaction of the app's own DataSource (TypeORM's `dataSource.transaction`),
 * handing it the transaction's EntityManager and the pg client under it: given by the module
 * layer when the queue's connection comes from a DataSource, so this file knows nothing of TypeORM.
 */
export type AppTransaction = <T>(fn: (tx: { manager: TransactionManager; client: PgPoolClient }) => Promise<T>) => Promise<T>;

/** Thrown inside a transactional step whose record was refused: rolls its transaction back. */
const NOT_RECORDED = Object.freeze(new Error('step not recorded'));

/** A wait without timeout parks for this long at a time (it parks again if woken without its signal). */
const PARK_FOR_EVER_MS = MAX_DELAY_MS;

/** The steps of one attempt: made on its first step call, so a plain handler allocates none of it. */
class AttemptSteps {
  /** The recorded steps by name, loaded on the first call. */
  recorded: Promise<Map<string, StepRow>> | null = null;
  /** The database's clock at the load, and performance.now() then: now on the database = dbMs + elapsed. */
  dbMs = 0;
  at = 0;
  /** Calls so far in this run: the next call's seq. */
  seq = 0;
  readonly names = new Set<string>();
  /** Set once the job is parked: the attempt has ended, every later call throws this again. */
  parked: JobParkedError | null = null;

  dbNow(): number {
    return this.dbMs + (performance.now() - this.at);
  }
}

/**
 * job.step(), job.sleep(), job.waitFor() of every job a worker runs: one object per worker.
 * Each attempt reads its job's recorded steps once, on its first call (one query: nothing at the
 * claim, so plain handlers pay nothing), then records each new step with one INSERT.
 */
export class StepRunner implements StepHost {
  /** Each running attempt's steps, made on its first call. */
  private readonly states = new WeakMap<RunningJob, AttemptSteps>();

  constructor(
    private readonly store: JobStore,
    private readonly workerId: string,
    private readonly logger: EngineLogger,
    /** The progress tracker and the log buffer: what they hold lands before a park hands the job back. */
    private readonly flushers: readonly { flush(job: RunningJob): Promise<void> | null }[],
    /** The app's DataSource transaction, when the queue's connection comes from one: `{ manager }` steps. */
    private readonly appTransaction?: AppTransaction,
  ) {}

  async step<T>(
    job: RunningJob,
    name: string,
    fn: (ctx: TransactionalStepContext) => Promise<T> | T,
    options: StepOptions | undefined,
  ): Promise<T> {
    const { state, seq } = this.begin(job, name);
    const recorded = await this.recorded(job, state);
    const found = recorded.get(name);
    if (found) return this.replay(job, found, 'step', seq) as T;
    const startedAtMs = Date.now();
    const idempotencyKey = `${job.id}:${name}`;
    const rec = { jobId: job.id, workerId: this.workerId, attempt: job.attempt, name, seq, startedAtMs };
    let out: { value: T; json: string | null } | null;
    if (options?.transaction) {
      const inTransaction = async (exec: SqlExecutor, client: PgPoolClient, manager: TransactionManager | null) => {
        const value = await fn(stepContext(job, name, idempotencyKey, client, manager));
        const json = resultJson(job, name, value);
        // Not recorded (recorded by another run, or the lease is gone): the throw rolls the writes back.
        if ((await this.store.steps.record({ ...rec, resultJson: json }, exec)) === 'not-recorded') throw NOT_RECORDED;
        return { value, json };
      };
      const app = this.appTransaction;
      out = await (
        app
          ? app(({ manager, client }) => inTransaction(managerExecutor(manager), client, manager))
          : this.store.steps.transaction((client, exec) => inTransaction(exec, client, null))
      ).catch((err: unknown) => {
        if (err === NOT_RECORDED) return null;
        throw err;
      });
    } else {
      const value = await fn(stepContext(job, name, idempotencyKey, null, null));
      const json = resultJson(job, name, value);
      const done = await this.store.steps.record({ ...rec, resultJson: json });
      out = done === 'recorded' ? { value, json } : null;
    }
    if (out === null) return (await this.recordedElsewhere(job, state, name, seq)) as T;
    recorded.set(name, {
      name,
      seq,
      kind: 'step',
      status: 'done',
      result: out.json === null ? undefined : JSON.parse(out.json),
      attempt: job.attempt,
      startedAtMs,
      finishedAtMs: Date.now(),
      wakeAtMs: null,
    });
    // What a later attempt returns: the value as JSON carries it, on this run too.
    return (out.json === null ? undefined : JSON.parse(out.json)) as T;
  }

  async sleep(job: RunningJob, name: string, msOrUntil: number | Date): Promise<void> {
    const { state, seq } = this.begin(job, name);
    const untilMs = msOrUntil instanceof Date ? msOrUntil.getTime() : msOrUntil;
    if (!Number.isFinite(untilMs) || (!(msOrUntil instanceof Date) && untilMs < 0)) {
      throw new StepError(job.id, name, `job.sleep(${quote(name)}) takes a number of milliseconds >= 0 or a valid Date.`);
    }
    const recorded = await this.recorded(job, state);
    const found = recorded.get(name);
    if (found) this.checkKind(job, found, 'sleep', seq);
    const now = state.dbNow();
    const wakeAtMs = found?.wakeAtMs ?? (msOrUntil instanceof Date ? untilMs : now + untilMs);
    if (found && now >= wakeAtMs) return;
    await this.park(job, state, name, seq, 'sleep', wakeAtMs, wakeAtMs);
  }

  async waitFor<T>(job: RunningJob, name: string, timeoutMs: number | undefined): Promise<T> {
    const { state, seq } = this.begin(job, name);
    if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs >= 0)) {
      throw new StepError(job.id, name, `job.waitFor(${quote(name)}) timeoutMs must be a whole number of milliseconds >= 0.`);
    }
    const recorded = await this.recorded(job, state);
    let found = recorded.get(name);
    if (found) this.checkKind(job, found, 'wait', seq);
    if (found?.status === 'done') {
      // A signal sent before the job got here: it takes the wait's place (one write, once).
      if (found.seq === null) {
        await this.store.steps.placeSignal(job.id, name, seq, job.attempt);
        recorded.set(name, { ...found, seq, attempt: job.attempt });
      }
      return found.result as T;
    }
    if (found?.status === 'timed-out') throw new WaitTimeoutError(job.id, name, timeoutMs ?? null);
    const now = state.dbNow();
    const wakeAtMs = found ? found.wakeAtMs : timeoutMs === undefined ? null : now + timeoutMs;
    if (found && wakeAtMs !== null && now >= wakeAtMs) {
      if (await this.store.steps.timeOut(job.id, this.workerId, job.attempt, name)) {
        found = { ...found, status: 'timed-out' };
        recorded.set(name, found);
        throw new WaitTimeoutError(job.id, name, timeoutMs ?? null);
      }
      // A signal came meanwhile (or the lease is gone): read it back.
    } else {
      // Throws once parked; returns when the signal is there already.
      await this.park(job, state, name, seq, 'wait', wakeAtMs, wakeAtMs ?? now + PARK_FOR_EVER_MS, true);
    }
    return (await this.recordedElsewhere(job, state, name, seq)) as T;
  }

  /** Checks the name, counts the call; throws the park again once the job is parked. */
  private begin(job: RunningJob, name: string): { state: AttemptSteps; seq: number } {
    let state = this.states.get(job);
    if (!state) this.states.set(job, (state = new AttemptSteps()));
    if (state.parked) throw state.parked;
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw new StepError(job.id, String(name), `A step name must be a string of 1 to 200 characters, got ${quote(name)}.`);
    }
    if (state.names.has(name)) {
      throw new StepError(
        job.id,
        name,
        `Step ${quote(name)} of job ${job.id} (${job.queue}/${job.name}) is used twice in one run: ` +
          'give each step its own name (in a loop, add the index: `item-${i}`).',
      );
    }
    state.names.add(name);
    return { state, seq: state.seq++ };
  }

  private recorded(job: RunningJob, state: AttemptSteps): Promise<Map<string, StepRow>> {
    return (state.recorded ??= this.store.steps.load(job.id).then((r) => {
      state.dbMs = r.nowMs;
      state.at = performance.now();
      return new Map(r.steps.map((s) => [s.name, s]));
    }));
  }

  /** A recorded step: its result, once its kind and position are checked. */
  private replay(job: RunningJob, found: StepRow, kind: StepRow['kind'], seq: number): unknown {
    this.checkKind(job, found, kind, seq);
    return found.result;
  }

  /**
   * The name is the step's identity: a recorded step of another kind is an error; one recorded at
   * another position (steps added, removed or reordered by a deploy between two runs) is
   * reported, and its recorded result is used all the same.
   */
  private checkKind(job: RunningJob, found: StepRow, kind: StepRow['kind'], seq: number): void {
    if (found.kind !== kind) {
      throw new StepError(
        job.id,
        found.name,
        `Step ${quote(found.name)} of job ${job.id} was recorded as a ${found.kind}, and is now called as a ${kind}: ` +
          'rename one of them (a step name is its identity across runs).',
      );
    }
    if (found.seq !== null && found.seq !== seq) {
      this.logger.warn(
        `Job ${job.id} (${job.queue}/${job.name}): step ${quote(found.name)} was recorded at position ${found.seq} ` +
          `and is now at ${seq} (the handler's steps changed between runs); its recorded result is used.`,
      );
    }
  }

  /** The step was not recorded by this run: another run recorded it first, or the lease is gone. */
  private async recordedElsewhere(job: RunningJob, state: AttemptSteps, name: string, seq: number): Promise<unknown> {
    const fresh = (await this.store.steps.load(job.id)).steps.find((s) => s.name === name);
    if (!fresh || fresh.status !== 'done') throw new LeaseLostError(job.id);
    (await this.recorded(job, state)).set(name, fresh);
    return this.replay(job, fresh, fresh.kind, seq);
  }

  /**
   * Parks the job until `parkUntilMs`: the attempt ends here, not counted (throws JobParkedError).
   * Returns (for a wait) when its signal is there already; throws LeaseLostError when the job is
   * no longer this attempt's.
   */
  private async park(
    job: RunningJob,
    state: AttemptSteps,
    name: string,
    seq: number,
    kind: 'sleep' | 'wait',
    wakeAtMs: number | null,
    parkUntilMs: number,
    mayFind = false,
  ): Promise<void> {
    // The progress and log lines of the attempt land first: the park ends the lease they are written under.
    await Promise.all(this.flushers.map((f) => f.flush(job)));
    const rec = { jobId: job.id, workerId: this.workerId, attempt: job.attempt, name, seq };
    const r = await this.store.steps.park(rec, kind, wakeAtMs, Math.max(parkUntilMs, 0));
    if (r === 'lost') throw new LeaseLostError(job.id);
    if (r === 'not-parked' && mayFind) return;
    state.parked = new JobParkedError(job.id, name);
    job.park();
    throw state.parked;
  }
}

/**
 * A step function's context. `client` and `manager` are getters: reading one the step does not
 * have (a step without `{ transaction: true }`; a manager where the queue has no DataSource)
 * throws PgQueueConfigError saying what to configure, instead of handing the function undefined.
 */
function stepContext(
  job: RunningJob,
  name: string,
  idempotencyKey: string,
  client: PgPoolClient | null,
  manager: TransactionManager | null,
): TransactionalStepContext {
  const step = `Step ${quote(name)} of job ${job.id} (${job.queue}/${job.name})`;
  const notTransactional = `${step} is not transactional: pass { transaction: true } as its third argument.`;
  const noDataSource =
    `${step} asks for a TypeORM EntityManager, but queue "${job.queue}" has no DataSource: its connection is ` +
    'a `connection` string or PoolConfig. Configure PgQueueModule.forRoot({ dataSource }) (or import ' +
    "TypeOrmModule.forRoot() and leave `connection` out, so the app's default DataSource is used), " +
    'or write through `client`, a node-postgres client in the same transaction.';
  const ctx = { idempotencyKey, attempt: job.attempt } as TransactionalStepContext;
  // A handle the step has is a plain property; one it lacks is a getter that throws, not
  // enumerable, so spreading or logging the context never trips it.
  const handle = (key: 'client' | 'manager', value: object | null, why: string) =>
    Object.defineProperty(
      ctx,
      key,
      value
        ? { value, enumerable: true }
        : {
            enumerable: false,
            get: () => {
              throw new PgQueueConfigError(why);
            },
          },
    );
  handle('client', client, notTransactional);
  handle('manager', manager, client ? noDataSource : notTransactional);
  return ctx;
}

/** A step's result as stored JSON (null for undefined); one JSON cannot carry fails the step. */
function resultJson(job: RunningJob, name: string, value: unknown): string | null {
  if (value === undefined) return null;
  try {
    return toJsonText(value, 'result');
  } catch (err) {
    throw new PgQueuePayloadError(
      `Result of step ${quote(name)} of job ${job.id} cannot be stored as JSON: ${(err as Error).message}. Return plain data (or nothing).`,
      job.queue,
      job.name,
      { cause: err },
    );
  }
}
