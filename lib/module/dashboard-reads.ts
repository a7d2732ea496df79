import type { DashboardReads } from '../core/dashboard-reads';
import { DashboardStore } from '../db/dashboard-store';
import type { PgQueueConnection } from './pg-queue.connection';

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
