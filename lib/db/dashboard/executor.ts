import { DashboardBusyError } from '../../core/dashboard-reads';
import type { PgPool } from '../../core/pg-types';
import type { SqlExecutor } from '../executor';

/**
 * The most dashboard statements that may wait for a connection at once. Every open page polls a
 * few reads every 2 s; with the database slow, they would pile up without end behind the half of
 * the pool the dashboard may hold (each page's next poll adding more).
 */
export const MAX_WAITING = 100;

/** A turn-taking gate: at most `max` statements at once; the others wait their turn in order. */
export interface Gate {
  readonly max: number;
  running: number;
  readonly waiting: (() => void)[];
}

/** `db`, taking turns at `gate` with every other executor on it; refuses past MAX_WAITING waiting. */
export function limited(db: SqlExecutor, gate: Gate): SqlExecutor {
  return {
    async query<R>(sql: string, params: readonly unknown[], name?: string): Promise<R[]> {
      if (gate.running >= gate.max) {
        if (gate.waiting.length >= MAX_WAITING) {
          throw new DashboardBusyError(
            `The dashboard has ${MAX_WAITING} reads waiting for a connection already: the database answers slowly; try again shortly.`,
          );
        }
        await new Promise<void>((resolve) => gate.waiting.push(resolve));
      } else gate.running++;
      try {
        return await db.query<R>(sql, params, name);
      } finally {
        const next = gate.waiting.shift();
        if (next) next();
        else gate.running--;
      }
    },
  };
}

/**
 * Runs each statement in a transaction of its own under `SET LOCAL statement_timeout`, so no
 * dashboard read can run longer than `timeoutMs` however large the tables grow (the setting ends
 * with the transaction: the pool's connection goes back to the workers unchanged). With `noJit`,
 * JIT compilation is off too: the throughput's counts on the ranged partitions' BRIN index are
 * costed high (lossy bitmap scans), which crossed jit_above_cost: 153 ms of JIT compile for a
 * 3.6 ms read (EXPLAIN ANALYZE, 1,000,000 finished jobs in the hour, PostgreSQL 15 with jit on).
 * BEGIN and the settings go in one round trip (a simple query of several statements).
 */
export function bounded(pool: PgPool, timeoutMs: number, noJit: boolean): SqlExecutor {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1)
    throw new RangeError(`statement timeout ${timeoutMs} is not a positive integer`);
  const begin = `BEGIN; SET LOCAL statement_timeout = ${timeoutMs}${noJit ? '; SET LOCAL jit = off' : ''}`;
  return {
    async query<R>(sql: string, params: readonly unknown[]): Promise<R[]> {
      const c = await pool.connect();
      try {
        await c.query(begin);
        const { rows } = await c.query<R>({ text: sql, values: params as unknown[] });
        await c.query('COMMIT');
        return rows;
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        if ((err as { code?: unknown }).code === '57014') {
          throw new DashboardBusyError(
            `A dashboard read ran past statementTimeoutMs (${timeoutMs} ms) and was cancelled: the tables are large or ` +
              'busy. Raise statementTimeoutMs if this read must finish, or narrow it (a state, a name).',
            { cause: err },
          );
        }
        throw err;
      } finally {
        c.release();
      }
    },
  };
}
