import type { ModuleRef } from '@nestjs/core';
import { clientExecutor, managerExecutor, type SqlExecutor } from '../db/executor';
import { PgQueueConfigError, PgQueueError, PgQueueMissingPeerError } from '../core/errors';
import type { TransactionClient, TransactionManager } from '../core/job';
import { isInstalled, isLoaded, missingPackage, unresolvableFrom } from '../core/optional-peer';

/** The part of @nestjs-cls/transactional's TransactionHost this library reads. */
interface TransactionHostLike {
  isTransactionActive(): boolean;
  readonly tx: unknown;
}

/**
 * The transaction of @nestjs-cls/transactional active in the calling context, if that optional
 * package is installed and its plugin registered: inside a `@Transactional()` method, `add()`
 * then joins it with no `manager` argument. Looked up on first use (the CLS module may start
 * after this one) and remembered; without the package this always answers undefined. Throws if
 * the active transaction's adapter is one whose transaction cannot run our SQL.
 */
export function clsTransaction(moduleRef: ModuleRef): () => SqlExecutor | undefined {
  let host: TransactionHostLike | null | undefined;
  return () => {
    if (host === undefined) host = findHost(moduleRef);
    if (!host || !host.isTransactionActive()) return undefined;
    const tx = host.tx as Partial<TransactionManager & TransactionClient> & { getRepository?: unknown };
    // The TypeORM adapter's tx is an EntityManager; the pg adapter's a PoolClient.
    if (typeof tx.getRepository === 'function') return managerExecutor(tx as TransactionManager);
    if (typeof tx.query === 'function') return clientExecutor(tx as TransactionClient);
    // Another adapter (Prisma, Knex, ...): enqueueing on the pool instead would let the job
    // outlive a rollback of the transaction the caller is in.
    throw new PgQueueConfigError(
      'add() runs inside a @Transactional() transaction whose @nestjs-cls/transactional adapter nestjs-pg-queue ' +
        'cannot join (its tx has neither getRepository() nor query()), so the job would not roll back with it. ' +
        'Register the TypeORM or pg adapter on the same database (npm install @nestjs-cls/transactional-adapter-typeorm, ' +
        'or @nestjs-cls/transactional-adapter-pg), or pass { manager } or { client } to add(), or enqueue outside the transaction.',
    );
  };
}

const CLS_TRANSACTIONAL = '@nestjs-cls/transactional';

function findHost(moduleRef: ModuleRef): TransactionHostLike | null {
  // Optional peer: loaded only if installed, so apps without it load nothing.
  if (!isInstalled(CLS_TRANSACTIONAL)) return null;
  // An app whose TransactionHost exists has loaded the package itself (its module imports
  // ClsPluginTransactional, its services @Transactional): it is in the module cache by bootstrap.
  // One that has not loaded it cannot be in a @Transactional() method, and loading it here would
  // only cost: nestjs-cls calls AsyncLocalStorage.enterWith() as it loads, which turns on
  // promise hooks for the whole process, a cost on every promise of every job (found because
  // this repository's devDependencies have it installed; bench/, issue 30). Its own peer is
  // still checked, so an install that cannot work still fails the boot.
  if (!isLoaded(CLS_TRANSACTIONAL)) {
    const missing = unresolvableFrom('nestjs-cls', CLS_TRANSACTIONAL);
    if (missing)
      throw new PgQueueMissingPeerError('nestjs-cls', `${CLS_TRANSACTIONAL} (installed in this app)`, { cause: missing });
    return null;
  }
  let token: unknown;
  try {
    // Optional peer: required only if present, so apps without it load nothing.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    token = (require(CLS_TRANSACTIONAL) as { TransactionHost?: unknown }).TransactionHost;
  } catch (err) {
    // Installed but unloadable, typically without its own peer nestjs-cls. Ignoring it would let
    // add() inside a @Transactional() method write its job outside that transaction.
    const missing = missingPackage(err);
    if (missing) throw new PgQueueMissingPeerError(missing, `${CLS_TRANSACTIONAL} (installed in this app)`, { cause: err });
    throw new PgQueueError(`${CLS_TRANSACTIONAL} is installed but could not be loaded: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!token) return null;
  try {
    return moduleRef.get(token as never, { strict: false }) as TransactionHostLike;
  } catch {
    return null; // installed, but ClsPluginTransactional is not registered in this app
  }
}
