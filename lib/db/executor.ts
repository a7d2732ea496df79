import { PgQueueConfigError } from '../core/errors';
import type { TransactionClient, TransactionManager } from '../core/job';
import type { PgPool, PgPoolClient, PgQueryable } from '../core/pg-types';

/**
 * Runs one statement and returns its rows: the one shape the store needs. With `name`, the
 * statement is prepared once per connection under that name (where the executor can).
 */
export interface SqlExecutor {
  query<R>(sql: string, params: readonly unknown[], name?: string): Promise<R[]>;
  /**
   * The caller's manager or client this executor runs on (absent for the queue's pool): what
   * the check that a transaction is on the queue's database remembers its answer by.
   */
  readonly source?: object;
  /**
   * Resolves once the caller's target is known to be in a transaction, or rejects: present only
   * when that takes a round trip (see transactionExecutorFor). `query` awaits it too.
   */
  readonly ready?: () => Promise<void>;
}

async function run<R>(target: PgQueryable, sql: string, params: readonly unknown[], name?: string): Promise<R[]> {
  const config = name ? { name, text: sql, values: params as unknown[] } : { text: sql, values: params as unknown[] };
  return (await target.query<R>(config)).rows;
}

/**
 * Runs one statement and returns its rows as arrays of values, with the names of its columns:
 * for the claim, whose rows the worker decodes by position (claim.ts). pg builds each object row
 * by copying a template and storing every column under its name, a keyed store per value.
 */
export async function arrayRows(
  target: PgQueryable,
  sql: string,
  params: readonly unknown[],
  name?: string,
): Promise<{ rows: unknown[][]; columns: readonly { readonly name: string }[] }> {
  const res = await target.query<unknown[]>({ name, text: sql, values: params as unknown[], rowMode: 'array' });
  return { rows: res.rows, columns: res.fields ?? [] };
}

/** Runs each statement on any free connection of the queue's pool (autocommit). */
export function poolExecutor(pool: PgPool): SqlExecutor {
  return { query: (sql, params, name) => run(pool, sql, params, name) };
}

/** Runs on one pg client, in whatever transaction it has open. */
export function clientExecutor(client: TransactionClient | PgPoolClient): SqlExecutor {
  return { query: (sql, params, name) => run(client as PgQueryable, sql, params, name), source: client };
}

/**
 * Runs on a TypeORM EntityManager, so inside its transaction. TypeORM returns the rows of a
 * statement whose top level is SELECT or INSERT; the store sends only such statements here.
 */
export function managerExecutor(manager: TransactionManager): SqlExecutor {
  return {
    source: manager,
    // TypeORM has no named statements: `name` is ignored here.
    async query<R>(sql: string, params: readonly unknown[]) {
      const out = await manager.query(sql, params as unknown[]);
      if (!Array.isArray(out)) {
        throw new TypeError('EntityManager.query() did not return rows; is this a PostgreSQL DataSource?');
      }
      return out as R[];
    },
  };
}

/** Where the insert runs: the queue's pool by default, or the caller's transaction. */
export interface TransactionTarget {
  /** A TypeORM `EntityManager` inside a transaction: the statement runs in it (see `EnqueueOptions.manager`). */
  readonly manager?: TransactionManager;
  /** A node-postgres client after `BEGIN`: the statement runs in its transaction (see `EnqueueOptions.client`). */
  readonly client?: TransactionClient;
}

/** The caller's transaction as an executor, or undefined for the queue's pool. */
export function executorFor(t: TransactionTarget | undefined): SqlExecutor | undefined {
  if (t?.manager && t.client) throw new PgQueueConfigError('Pass either manager or client, not both.');
  if (t?.manager) return managerExecutor(t.manager);
  if (t?.client) return clientExecutor(t.client);
  return undefined;
}

/** Who asks for a transaction (`add()`, `completeWith()`...) and what would commit at once without one. */
export interface TransactionUse {
  /** For the message: `add()`, `addBulk()`, `completeWith()`... */
  readonly caller: string;
  /** What would escape the caller's rollback: `the job`, `the cancel`, `the completion`... */
  readonly effect: string;
}

/**
 * The caller's transaction as an executor for a write, or undefined for the queue's pool. Refuses
 * (PgQueueConfigError) a manager or client that is not in a transaction: each statement on it
 * would autocommit, so `use.effect` would commit at once even if the caller's other work then
 * rolled back, which is the very promise of passing one. Checked without a round trip where the
 * target says (a TypeORM query runner's flag, pg's transaction status); see clientInTransaction.
 */
export function transactionExecutorFor(t: TransactionTarget | undefined, use: TransactionUse): SqlExecutor | undefined {
  const exec = executorFor(t);
  if (!exec || !t) return exec;
  if (t.manager) {
    const problem = managerProblem(t.manager);
    if (problem) throw notInTransaction(use, `the manager passed ${problem}`, MANAGER_FIX);
    return exec;
  }
  const client = t.client as unknown as PgClientLike;
  if (isPool(client)) {
    throw notInTransaction(
      use,
      'the client passed is a pg Pool: each of its queries runs on any free connection, in autocommit',
      CLIENT_FIX,
    );
  }
  if (typeof (client as { getRepository?: unknown }).getRepository === 'function') {
    throw new PgQueueConfigError(`${use.caller}: the client passed is a TypeORM EntityManager; pass it as { manager }.`);
  }
  if (IN_TRANSACTION.has(statusOf(client) ?? '')) return exec;
  // Not known to be in one (yet): checked before the first statement.
  let checked: Promise<void> | null = null;
  const ready = (): Promise<void> => (checked ??= clientInTransaction(client, use));
  return {
    source: exec.source,
    ready,
    query: async (sql, params, name) => {
      await ready();
      return exec.query(sql, params, name);
    },
  };
}

const MANAGER_FIX =
  'Pass the manager that dataSource.transaction(async (manager) => ...) hands you, or queryRunner.manager after ' +
  'await queryRunner.startTransaction()';
const CLIENT_FIX =
  "Pass a client in a transaction: const client = await pool.connect(); await client.query('BEGIN'); then COMMIT " +
  'or ROLLBACK, and client.release()';

function notInTransaction(use: TransactionUse, why: string, fix: string): PgQueueConfigError {
  return new PgQueueConfigError(
    `${use.caller}: ${why}, so ${use.effect} would commit at once, even if your transaction's other work rolls back. ` +
      `${fix}; or leave it out to run on the queue's own pool (not atomic with your work).`,
  );
}

/** Why `m` is not known to be in a transaction, or null when it is (TypeORM's own flag). */
function managerProblem(m: TransactionManager): string | null {
  const { queryRunner, getRepository } = m as { queryRunner?: { isTransactionActive?: unknown }; getRepository?: unknown };
  if (queryRunner?.isTransactionActive === true) return null;
  if (typeof getRepository !== 'function') {
    return 'is not a TypeORM EntityManager, so whether it is in a transaction cannot be told (for node-postgres, pass { client })';
  }
  if (!queryRunner) {
    return 'is not in a transaction (it has no query runner: dataSource.manager, or an injected EntityManager), so each of its queries autocommits';
  }
  return 'is not in a transaction (its query runner has none started, or it has ended)';
}

/** The parts of a node-postgres Client (or PoolClient) the check reads. */
interface PgClientLike {
  query(text: string): Promise<unknown>;
  /** pg >= 8.2x: the status byte of the last ReadyForQuery ('I' idle, 'T' in a transaction, 'E' failed one). */
  getTransactionStatus?(): string | null;
  /** Older pg: the protocol connection, which emits each ReadyForQuery. */
  readonly connection?: { on?(event: 'readyForQuery', listener: (msg: { status?: string }) => void): unknown };
}

/** 'E' counts: the caller's next statement fails on its own ("current transaction is aborted"). */
const IN_TRANSACTION = new Set(['T', 'E']);

/** pg's Pool by shape (pg is a peer: no instanceof across copies of it). */
function isPool(x: object): boolean {
  const p = x as { connect?: unknown; totalCount?: unknown; idleCount?: unknown };
  return typeof p.connect === 'function' && typeof p.totalCount === 'number' && typeof p.idleCount === 'number';
}

/** Status bytes followed for clients of a pg without getTransactionStatus(). */
const followed = new WeakMap<object, { status: string | null }>();

/**
 * PostgreSQL's own answer to "is this session in a transaction block": the status byte of every
 * ReadyForQuery message, which pg records (getTransactionStatus(), pg 8.2x) or, in older versions,
 * its connection emits (followed here from the first check on). PgBouncer in transaction mode
 * relays the server's byte (it reads it itself, to know when to hand the server connection back),
 * so the answer holds through it. No SQL function answers it: now() and statement_timestamp()
 * differ in autocommit too under the extended protocol (Bind and Execute restamp the statement
 * after Parse started the transaction: 200 of 200 parameterised statements on PostgreSQL 15),
 * and an assigned xid says nothing of a read-only transaction.
 */
function statusOf(client: PgClientLike): string | null {
  if (typeof client.getTransactionStatus === 'function') return client.getTransactionStatus();
  let f = followed.get(client);
  if (!f) {
    const conn = client.connection;
    if (typeof conn?.on !== 'function') return null;
    const state = { status: null as string | null };
    conn.on('readyForQuery', (msg) => (state.status = msg?.status ?? null));
    followed.set(client, (f = state));
  }
  return f.status;
}

/**
 * Resolves when `client` is in a transaction. The status byte read first may be stale (a BEGIN
 * sent without awaiting it is answered later) or not yet followed: one statement queued behind
 * whatever the client has in flight makes it current. Only then does it refuse.
 */
async function clientInTransaction(client: PgClientLike, use: TransactionUse): Promise<void> {
  if (IN_TRANSACTION.has(statusOf(client) ?? '')) return;
  await client.query('SELECT 1');
  const status = statusOf(client);
  if (status !== null && IN_TRANSACTION.has(status)) return;
  throw notInTransaction(
    use,
    status === 'I'
      ? 'the client passed is not in a transaction (no BEGIN), so each of its queries autocommits'
      : 'whether the client passed is in a transaction cannot be told: it reports no transaction status ' +
          '(pass a node-postgres Client or PoolClient, not a wrapper or a pg-native client)',
    CLIENT_FIX,
  );
}
