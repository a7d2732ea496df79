import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import type { CleanState } from '../core/clean';
import type { ListState } from '../core/dashboard-reads';
import { PgQueueError } from '../core/errors';
import { isJobId } from '../core/names';
import { dashboardQueue, setNodeConcurrency, type DashboardQueue } from '../module/dashboard-reads';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { PgQueueRuntime } from '../module/pg-queue.runtime';
import { DashboardInputError } from './dashboard-input';
import type { MatchFilter, MatchingAction } from './dashboard-operations-input';
import { PG_QUEUE_DASHBOARD_OPTIONS, type DashboardRequest, type ResolvedDashboardOptions } from './dashboard.options';
import { DashboardService } from './dashboard.service';

/**
 * The most jobs one count examines: the confirmation of an action over every job matching a
 * filter says "at least 100,000" past it, rather than walking a million index entries on each
 * poll of the page (a capped count of 100,000 history entries is an index-only range scan of
 * tens of milliseconds; every dashboard statement runs under its statement_timeout anyway).
 */
export const COUNT_CAP = 100_000;

/** One job the search box found: by its id, or as the live job holding the unique key typed. */
export interface SearchHit {
  readonly id: string;
  readonly queue: string;
  readonly name: string;
  readonly state: string;
  readonly connection: string;
  readonly match: 'id' | 'uniqueKey';
}

/**
 * The operator's actions of the dashboard (issue 27 point 8): the search box, the counts an
 * action's confirmation shows, clean by age, drain, promote. Each runs the `Queue` call an app
 * would (validation, batches of a thousand in short transactions, wake-ups), through the narrow
 * DashboardQueue of lib/module; the counts read through DashboardReads.
 */
@Injectable()
export class DashboardOperations {
  constructor(
    @Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime,
    @Inject(PG_QUEUE_DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(DashboardService) private readonly svc: DashboardService,
  ) {}

  private queue(name: string): DashboardQueue {
    return dashboardQueue(this.runtime, this.svc.connectionOfQueue(name), name);
  }

  /** Runs a Queue call; a refusal of its input (PgQueueConfigError and the like) answers 400. */
  private async run<T>(call: () => Promise<T>): Promise<T> {
    try {
      return this.svc.changed(await call());
    } catch (err) {
      if (err instanceof PgQueueError) throw new DashboardInputError(err.message, { cause: err });
      throw err;
    }
  }

  /**
   * The jobs `q` names: the job of that id (when `q` is one) in any database, and in every queue
   * of every database the live job holding `q` as its unique key (queue.getJobByKey, one lookup
   * on the (queue, unique_key) index per queue). With `authorize`, only jobs of queues it lets
   * this request read are answered: a search must not show what the job page would refuse.
   */
  async search(q: string, req: DashboardRequest): Promise<{ query: string; jobs: SearchHit[] }> {
    const hits: SearchHit[] = [];
    if (isJobId(q) && q.length <= 19 && BigInt(q) > 0n && BigInt(q) <= 9223372036854775807n) {
      const found = await this.svc.job(q);
      if (found) {
        const j = found.job;
        hits.push({ id: j.id, queue: j.queue, name: j.name, state: j.state, connection: found.connection, match: 'id' });
      }
    }
    for (const { connection, queues } of await this.svc.queuesByConnection()) {
      for (const name of queues) {
        const j = await dashboardQueue(this.runtime, connection, name).getJobByKey(q);
        if (j) hits.push({ id: j.id, queue: j.queue, name: j.name, state: j.state, connection, match: 'uniqueKey' });
      }
    }
    const authorize = this.options.authorize;
    if (!authorize) return { query: q, jobs: hits };
    const allowed: SearchHit[] = [];
    for (const h of hits) {
      const ctx = { queue: h.queue, queues: [h.queue], connection: h.connection, ids: [h.id], filter: null };
      if (await authorize(req, 'read', ctx)) allowed.push(h);
    }
    return { query: q, jobs: allowed };
  }

  /** How many jobs of a queue match a state, a name and an age, up to COUNT_CAP (`GET api/queues/:queue/count`). */
  async count(queue: string, f: MatchFilter): Promise<{ count: number; atLeast: boolean }> {
    const n = await this.svc.readsOfQueue(queue).countMatching(queue, f.state, f.name, f.olderThanMs, COUNT_CAP);
    return { count: n, atLeast: n >= COUNT_CAP };
  }

  /** queue.clean(): finished jobs of a state older than an age (`POST api/queues/:queue/clean`). */
  clean(queue: string, opts: { state: CleanState; olderThanMs: number; limit?: number }): Promise<{ removed: number }> {
    return this.run(async () => ({ removed: await this.queue(queue).clean(opts) }));
  }

  /** queue.drain(): every waiting and delayed job (`POST api/queues/:queue/drain`). */
  drain(queue: string): Promise<{ removed: number }> {
    return this.run(async () => ({ removed: await this.queue(queue).drain() }));
  }

  /** queue.promoteJobs({ name }): every delayed job (of a name) due now (`POST api/queues/:queue/promote-all`). */
  promoteAll(queue: string, name: string | null): Promise<{ promoted: number }> {
    return this.run(async () => ({ promoted: await this.queue(queue).promoteJobs(name === null ? {} : { name }) }));
  }

  /**
   * Every job of a queue in a state (of a name): `retryJobs`, `removeJobs` or `cancelJobs` with
   * that filter, in batches of a thousand, each its own short transaction on the queue's pool
   * (`POST api/queues/:queue/retry-matching`, `remove-matching`, `cancel-matching`). The states
   * each takes were checked (MATCHING_STATES); the call checks them again.
   */
  matching(
    action: MatchingAction,
    queue: string,
    f: { state: ListState; name: string | null },
  ): Promise<{ retried: number } | { removed: number } | { cancelled: number }> {
    const filter = { state: f.state, ...(f.name === null ? {} : { name: f.name }) };
    return this.run(async () => {
      const q = this.queue(queue);
      if (action === 'retry') return { retried: await q.retryJobs(filter as Parameters<DashboardQueue['retryJobs']>[0]) };
      if (action === 'remove') return { removed: await q.removeJobs(filter as Parameters<DashboardQueue['removeJobs']>[0]) };
      return { cancelled: await q.cancelJobs(filter as Parameters<DashboardQueue['cancelJobs']>[0]) };
    });
  }

  /**
   * A queue's concurrency as every node runs it (`GET api/queues/:queue/concurrency`): each live
   * node of the queue's database with a worker for it and that node's concurrency now (from its
   * last heartbeat), this app's `globalConcurrency` option, and the value stored by
   * setGlobalConcurrency, which overrides the option on every node.
   */
  async concurrency(queue: string): Promise<{
    nodes: { id: string; host: string; pid: number; concurrency: number }[];
    globalConcurrency: { option: number | null; stored: number | null };
  }> {
    const connection = this.svc.connectionOfQueue(queue);
    const { nodes } = await this.svc.nodes();
    const running = nodes.flatMap((n) =>
      n.connection !== connection
        ? []
        : n.queues
            .filter((q) => q.name === queue)
            .map((q) => ({ id: n.id, host: n.host, pid: n.pid, concurrency: q.concurrency })),
    );
    const option = this.runtime.queueOptions(queue)?.globalConcurrency ?? null;
    return { nodes: running, globalConcurrency: { option, stored: await this.queue(queue).getGlobalConcurrency() } };
  }

  /** queue.setGlobalConcurrency(n), or with null removeGlobalConcurrency() (`POST api/queues/:queue/global-concurrency`). */
  globalConcurrency(queue: string, n: number | null): Promise<{ globalConcurrency: number | null }> {
    return this.run(async () => {
      const q = this.queue(queue);
      await (n === null ? q.removeGlobalConcurrency() : q.setGlobalConcurrency(n));
      return { globalConcurrency: n };
    });
  }

  /**
   * Asks one node to run `n` jobs of the queue at once (`POST api/queues/:queue/nodes/:node/concurrency`):
   * stored in its registry row, which the node reads on the NOTIFY this sends and every
   * pollIntervalMs, then applies as `setConcurrency` would. 404 when no such node is registered.
   */
  async nodeConcurrency(queue: string, node: string, n: number): Promise<{ node: string; queue: string; concurrency: number }> {
    const found = await setNodeConcurrency(this.runtime, this.svc.connectionOfQueue(queue), node, queue, n);
    if (!found)
      throw new NotFoundException({ error: `No node ${JSON.stringify(node)} in the registry of queue "${queue}"'s database.` });
    this.svc.changed(undefined);
    return { node, queue, concurrency: n };
  }

  /** queue.promote(id) of each delayed job of these ids; returns the ids promoted (`POST api/jobs/promote`). */
  promote(ids: string[], connection: string | null): Promise<{ promoted: string[] }> {
    return this.run(async () => {
      const promoted: string[] = [];
      const on = connection ?? this.runtime.connections[0].name;
      for (const j of await this.svc.locate(ids, connection)) {
        if (await dashboardQueue(this.runtime, on, j.queue).promote(j.id)) promoted.push(j.id);
      }
      return { promoted };
    });
  }

  /**
   * A job scheduler's action (`POST api/queues/:queue/schedulers/:id/pause`, `resume`, `run`,
   * `remove`): the Queue call an app would make. Run now enqueues one job from its template
   * without moving its schedule. 404 when the queue has no scheduler of that id.
   */
  scheduler(action: SchedulerAction, queue: string, id: string): Promise<{ done: true; jobId?: string }> {
    return this.run(async () => {
      const q = this.queue(queue);
      let found: boolean;
      let jobId: string | undefined;
      if (action === 'pause') found = await q.pauseJobScheduler(id);
      else if (action === 'resume') found = await q.resumeJobScheduler(id);
      else if (action === 'remove') found = await q.removeJobScheduler(id);
      else found = (jobId = (await q.runJobSchedulerNow(id)) ?? undefined) !== undefined;
      if (!found) throw new NotFoundException(`Queue "${queue}" has no job scheduler ${JSON.stringify(id)}.`);
      return jobId === undefined ? { done: true as const } : { done: true as const, jobId };
    });
  }
}

/** What the schedules page can do to one job scheduler. */
export type SchedulerAction = 'pause' | 'resume' | 'run' | 'remove';
