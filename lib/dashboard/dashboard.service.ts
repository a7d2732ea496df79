import { Inject, Injectable } from '@nestjs/common';
import type { JobAttemptError, JobOptions } from '../core/job';
import { PgQueueError } from '../core/errors';
import { DashboardStore, type DashboardJob } from '../db/dashboard-store';
import { PG_QUEUE_RUNTIME } from '../module/pg-queue.constants';
import type { PgQueueRuntime } from '../module/pg-queue.runtime';
import { CostlyReads } from './costly-reads';
import { DashboardInputError, encodeCursor, type JobListQuery } from './dashboard-input';
import { PG_QUEUE_DASHBOARD_OPTIONS, type ResolvedDashboardOptions } from './dashboard.options';

/** A job in a list: what the table shows, without the payload (a 200-character preview) or stacks. */
export interface JobSummary {
  readonly id: string;
  readonly queue: string;
  readonly name: string;
  readonly state: string;
  readonly priority: number;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly runAt: Date;
  readonly createdAt: Date;
  readonly startedAt: Date | null;
  readonly finishedAt: Date | null;
  readonly uniqueKey: string | null;
  readonly lockedBy: string | null;
  readonly payloadPreview: string;
  readonly lastError: { readonly name: string; readonly message: string; readonly at: string } | null;
}

/** One entry of a job's timeline, oldest first. */
export interface TimelineEntry {
  readonly at: Date | string;
  readonly event: 'created' | 'started' | 'error' | 'completed' | 'failed' | 'cancelled' | 'due';
  readonly attempt: number;
  readonly node?: string;
  readonly error?: string;
}

const PREVIEW_CHARS = 200;

/** How long after a minute ends its throughput counts are taken as final (see DashboardService.throughput). */
export const SETTLE_MS = 10_000;

/**
 * The first of `minutes` (ISO starts, oldest first) that has not settled at `now`: it, and every
 * later one, is counted again on the next poll. Null when all have settled.
 */
export function firstOpenMinute(minutes: readonly string[], now: Date): string | null {
  return minutes.find((m) => Date.parse(m) + 60_000 > now.getTime() - SETTLE_MS) ?? null;
}

/** Builds every dashboard answer from the queue runtime (its pool, store and registered queues). */
@Injectable()
export class DashboardService {
  readonly store: DashboardStore;

  constructor(
    @Inject(PG_QUEUE_RUNTIME) private readonly runtime: PgQueueRuntime,
    @Inject(PG_QUEUE_DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
  ) {
    // Half the pool at most (the workers share it), and at least one connection.
    const connections = Math.max(1, Math.floor(runtime.options.poolSize / 2));
    this.store = new DashboardStore(runtime.pool, runtime.store.schema, runtime.store.channel, connections);
    this.costly = new CostlyReads(options.countsBudget);
  }

  /** The counts and the throughput: reused while recent compared with their cost (countsBudget). */
  private readonly costly: CostlyReads;

  /**
   * Every queue's counts: the overview's, and a queue page's too (it picks its row), so an open
   * overview and queue page share one count. Counting one queue costs little less than all when
   * one queue holds most jobs, the case where counting is costly.
   */
  private counts() {
    const registered = this.registered();
    return this.costly.read(`counts ${registered.join(',')}`, () => this.store.counts(registered));
  }

  /** After an action: its effect shows on the next read. */
  private changed<T>(result: T): T {
    this.costly.clear();
    return result;
  }

  /**
   * Counts of minutes that ended over SETTLE_MS ago: they no longer change (an outcome commits
   * within milliseconds of its finished_at), so each poll recounts only the current minute, and
   * the one before for SETTLE_MS after it ended. With 1,000,000 jobs finished in the hour that
   * is 0 to 70 s of job_history_retention_idx per poll (35 s on average), where keeping the last
   * two minutes open recounted 60 to 120 s.
   */
  private readonly closedMinutes = new Map<string, { completed: number; failed: number }>();
  private countedFrom: Date | null = null;

  private async throughput() {
    const t = await this.store.throughput(this.countedFrom);
    const minutes = t.minutes;
    const completed = t.completed.map((n, i) => this.closedMinutes.get(minutes[i])?.completed ?? n);
    const failed = t.failed.map((n, i) => this.closedMinutes.get(minutes[i])?.failed ?? n);
    // Keep the minutes that have settled; forget those out of the window.
    const open = firstOpenMinute(minutes, t.now);
    this.closedMinutes.clear();
    minutes.forEach((m, i) => {
      if (open === null || m < open) this.closedMinutes.set(m, { completed: completed[i], failed: failed[i] });
    });
    this.countedFrom = open === null ? null : new Date(open);
    return { minutes, completed, failed, now: t.now };
  }

  private registered(): string[] {
    return this.runtime.registeredQueues.map((q) => q.name);
  }

  async overview() {
    const [queues, t] = await Promise.all([this.counts(), this.costly.read('throughput', () => this.throughput())]);
    return {
      queues: queues.map((q) => ({ ...q, registered: this.runtime.queueOptions(q.name) !== undefined })),
      throughput: { minutes: t.minutes, completed: t.completed, failed: t.failed },
      readOnly: this.options.readOnly,
      now: t.now,
    };
  }

  async queue(name: string) {
    const [all, names] = await Promise.all([this.counts(), this.store.names(name)]);
    const found = all.find((q) => q.name === name);
    const o = this.runtime.queueOptions(name);
    // A queue nothing knows of (no jobs, no history, not registered, never paused) answers zeros.
    const {
      name: _n,
      paused,
      ...rest
    } = found ?? {
      name,
      waiting: 0,
      delayed: 0,
      active: 0,
      stalled: 0,
      failed: 0,
      cancelled: 0,
      paused: false,
      oldestWaitingAgeMs: null,
    };
    return {
      name,
      counts: rest,
      paused,
      options: o
        ? {
            concurrency: o.concurrency,
            globalConcurrency: o.globalConcurrency,
            limiter: o.limiter,
            deadLetterQueue: o.deadLetterQueue,
            defaultJobOptions: o.defaultJobOptions,
          }
        : null,
      retention: this.runtime.options.retention,
      names: [...new Set([...names, ...(o?.repeat.map((r) => r.name) ?? [])])].sort(),
    };
  }

  async jobs(queue: string, q: JobListQuery): Promise<{ jobs: JobSummary[]; next: string | null }> {
    if (q.id !== null) {
      const job = await this.store.job(q.id);
      // By id: the job of this queue in whatever state it is now (a list by state would miss it once it moved).
      return { jobs: job && job.queue === queue ? [summary(job)] : [], next: null };
    }
    const page = await this.store.listJobs(queue, q.state, q.filters, q.cursor, q.limit);
    return { jobs: page.jobs.map(summary), next: page.next ? encodeCursor(page.next) : null };
  }

  async job(id: string): Promise<{ job: DashboardJob; timeline: TimelineEntry[] } | null> {
    const job = await this.store.job(id);
    return job ? { job, timeline: timeline(job) } : null;
  }

  async schedules() {
    const ticks = await this.store.lastTicks();
    const now = new Date();
    const out: {
      queue: string;
      name: string;
      cron: string | null;
      tz: string | null;
      registered: boolean;
      lastTick: Date | null;
      next: string[];
    }[] = [];
    const seen = new Set<string>();
    for (const q of this.runtime.registeredQueues) {
      for (const r of q.repeat) {
        seen.add(r.key);
        const next: string[] = [];
        let t = r.next(now);
        for (let i = 0; t && i < 5; i++, t = r.next(t)) next.push(t.toISOString());
        out.push({
          queue: q.name,
          name: r.name,
          cron: r.cron,
          tz: r.tz,
          registered: true,
          lastTick: ticks.get(r.key) ?? null,
          next,
        });
      }
    }
    // Schedules another app (or an earlier version of this one) ticked: shown, with no expression known here.
    for (const [key, lastTick] of ticks) {
      if (seen.has(key)) continue;
      const cut = key.indexOf('/');
      out.push({
        queue: key.slice(0, cut),
        name: key.slice(cut + 1),
        cron: null,
        tz: null,
        registered: false,
        lastTick,
        next: [],
      });
    }
    return { schedules: out.sort((a, b) => a.queue.localeCompare(b.queue) || a.name.localeCompare(b.name)) };
  }

  async nodes() {
    const nodes = await this.store.nodes();
    return { nodes: nodes.map(({ heartbeatMs: _h, ...n }) => n) };
  }

  async retry(ids: string[]) {
    return this.changed({ retried: await this.store.retryIds(ids) });
  }

  async cancel(ids: string[]) {
    const cancelled: string[] = [];
    const cancelling: string[] = [];
    for (const j of await this.store.locate(ids)) {
      if (j.state !== 'waiting' && j.state !== 'active') continue;
      const r = await this.runtime.store.cancel(j.queue, j.id);
      if (r === 'cancelled') cancelled.push(j.id);
      else if (r === 'cancelling') cancelling.push(j.id);
    }
    return this.changed({ cancelled, cancelling });
  }

  async remove(ids: string[]) {
    const removed: string[] = [];
    for (const j of await this.store.locate(ids)) {
      if (await this.runtime.store.remove(j.queue, j.id)) removed.push(j.id);
    }
    return this.changed({ removed });
  }

  async retryFailed(queue: string, name: string | null) {
    return this.changed({ retried: await this.store.retryFailed(queue, name) });
  }

  async setPaused(queue: string, paused: boolean) {
    await this.runtime.store.setPaused(queue, paused);
    return this.changed({ paused });
  }

  async enqueue(queue: string, body: { name: string; payload: unknown; options: Record<string, unknown> }) {
    try {
      const job = await this.runtime.queue(queue, 'dashboard enqueue').add(body.name, body.payload, body.options as JobOptions);
      return this.changed({ job });
    } catch (err) {
      // Every refusal of add() (unregistered queue, bad name, payload or option) is the caller's to fix.
      if (err instanceof PgQueueError) throw new DashboardInputError(err.message, { cause: err });
      throw err;
    }
  }
}

function summary(j: DashboardJob): JobSummary {
  const last: JobAttemptError | undefined = j.errors[j.errors.length - 1];
  return {
    id: j.id,
    queue: j.queue,
    name: j.name,
    state: j.state,
    priority: j.priority,
    attempt: j.attempt,
    maxAttempts: j.maxAttempts,
    runAt: j.runAt,
    createdAt: j.createdAt,
    startedAt: j.startedAt,
    finishedAt: j.finishedAt,
    uniqueKey: j.uniqueKey,
    lockedBy: j.lockedBy,
    payloadPreview: (JSON.stringify(j.payload) ?? 'null').slice(0, PREVIEW_CHARS),
    lastError: last ? { name: last.name, message: last.message, at: last.at } : null,
  };
}

/** created, each attempt's error (with the node that ran it), the last start, the end. */
export function timeline(j: DashboardJob): TimelineEntry[] {
  const t: TimelineEntry[] = [{ at: j.createdAt, event: 'created', attempt: 0 }];
  for (const e of j.errors)
    t.push({
      at: e.at,
      event: 'error',
      attempt: e.attempt,
      ...(e.worker ? { node: e.worker } : {}),
      error: `${e.name}: ${e.message}`,
    });
  if (j.startedAt) t.push({ at: j.startedAt, event: 'started', attempt: j.attempt, ...(j.lockedBy ? { node: j.lockedBy } : {}) });
  if (j.finishedAt && (j.state === 'completed' || j.state === 'failed' || j.state === 'cancelled')) {
    t.push({ at: j.finishedAt, event: j.state, attempt: j.attempt, ...(j.lockedBy ? { node: j.lockedBy } : {}) });
  } else if (j.state === 'waiting' || j.state === 'delayed') {
    t.push({ at: j.runAt, event: 'due', attempt: j.attempt + 1 });
  }
  return t.sort((a, b) => new Date(a.at).getTime() - new Date(b.at).getTime());
}
