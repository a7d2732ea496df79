import type { ModuleRef } from '@nestjs/core';
import { clientExecutor, managerExecutor, type SqlExecutor } from '../db/executor';
import type { TransactionClient, TransactionManager } from '../core/job';

/** The part of @nestjs-cls/transactional's TransactionHost this library reads. */
interface TransactionHostLike {
  isTransactionActive(): boolean;
  readonly tx: unknown;
}

/**
 * The transaction of @nestjs-cls/transactional active in the calling context, if that optional
 * package is installed and its plugin registered: inside a `@Transactional()` method, `add()`
 * then joins it with no `manager` argument. Looked up on first use (the CLS module may start
 * after this one) and remembered; without the package this always answers undefined.
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
    return undefined;
  };
}

function findHost(moduleRef: ModuleRef): TransactionHostLike | null {
  let token: unknown;
  try {
    // Optional peer: required only if present, so apps without it load nothing.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    token = (require('@nestjs-cls/transactional') as { TransactionHost?: unknown }).TransactionHost;
  } catch {
    return null;
  }
  if (!token) return null;
  try {
    return moduleRef.get(token as never, { strict: false }) as TransactionHostLike;
  } catch {
    return null; // installed, but ClsPluginTransactional is not registered in this app
  }
}
