import type { DashboardReads } from '../core/dashboard-reads';
import { resolveQueueOptions } from '../core/options/module-checks';
import { DashboardStore } from '../db/dashboard-store';
import { Queue } from '../producer/queue';
import type { PgQueueConnection } from './pg-queue.connection';
import type { PgQueueRuntime } from './pg-queue.runtime';

/**
 * The dashboard's reads of one connection: a DashboardStore on its pool, schema and channel, which
 * lib/dashboard sees only as DashboardReads (it imports neither db/ nor worker/).
 * `maxConcurrent`: how many of the pool's connections the dashboard may hold at once;
 * `statementTimeoutMs`: every statement runs under `SET LOCAL statement_timeout` of this many ms.
 */
export function createDashboardReads(
  connection: PgQueueConnection,
  maxConcurrent: number,
  statementTimeoutMs: number,
): DashboardReads {
  const { pool, store } = connection;
  return new DashboardStore(pool, store.schema, store.channel, maxConcurrent, statementTimeoutMs);
}

/**
 * The operator's calls the dashboard makes on one queue, the same `Queue` methods an app calls
 * (validation, batching and wake-ups included). Only these: lib/dashboard sees no more of Queue.
 */
export type DashboardQueue = Pick<
  Queue,
  | 'name'
  | 'clean'
  | 'drain'
  | 'promote'
  | 'promoteJobs'
  | 'getJobByKey'
  | 'getJobCounts'
  | 'retryJobs'
  | 'removeJobs'
  | 'cancelJobs'
  | 'getGlobalConcurrency'
  | 'setGlobalConcurrency'
  | 'removeGlobalConcurrency'
  | 'pauseJobScheduler'
  | 'resumeJobScheduler'
  | 'runJobSchedulerNow'
  | 'removeJobScheduler'
>;

/**
 * Asks live node `nodeId` of connection `connection`'s registry to run `n` jobs of `queue` at once
 * (the node confirms by reading its row: stored-limits.ts); false when no such node is registered.
 */
export function setNodeConcurrency(
  runtime: PgQueueRuntime,
  connection: string,
  nodeId: string,
  queue: string,
  n: number,
): Promise<boolean> {
  const conn = runtime.connections.find((c) => c.name === connection) ?? runtime.connections[0];
  return conn.store.limits.setNodeConcurrency(nodeId, queue, n);
}

/**
 * The queue `name` on the connection `connection` names, for the dashboard's actions: the app's
 * own handle when it registers the queue, else one made for the dashboard on that connection's
 * store (a queue another app feeds, shown on the overview), which never enqueues.
 */
export function dashboardQueue(runtime: PgQueueRuntime, connection: string, name: string): DashboardQueue {
  if (runtime.queueOptions(name)) return runtime.queue(name, 'dashboard');
  const conn = runtime.connections.find((c) => c.name === connection) ?? runtime.connections[0];
  const { defaultJobOptions } = resolveQueueOptions({ name }, conn.options.defaultJobOptions);
  return new Queue(name, conn.store, defaultJobOptions, conn.options.maxPayloadBytes);
}
