import { PgQueueMissingPeerError } from './errors';

const notFound = (err: unknown) => (err as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND';

/**
 * Throws {@link PgQueueMissingPeerError} unless the package `peer` can be found. An entry point
 * that imports an optional peer calls this first (in a module it imports before the others), so
 * an app without that peer is told what to install instead of a bare "Cannot find module".
 */
export function assertPeerInstalled(peer: string, neededBy: string): void {
  try {
    require.resolve(peer);
  } catch (err) {
    if (notFound(err)) throw new PgQueueMissingPeerError(peer, neededBy, { cause: err });
    throw err;
  }
}

/** Whether the package `peer` resolves from this library (without loading it). */
export function isInstalled(peer: string): boolean {
  try {
    require.resolve(peer);
    return true;
  } catch (err) {
    if (notFound(err)) return false;
    throw err;
  }
}

/** Whether the package `peer` (which resolves: see isInstalled) has been loaded in this process, by the app or by us. */
export function isLoaded(peer: string): boolean {
  return require.resolve(peer) in require.cache;
}

/**
 * Why the package `peer` does not resolve from where the installed package `from` lives (a
 * MODULE_NOT_FOUND error), or null when it does: `from`'s own peer, checked without loading either.
 */
export function unresolvableFrom(peer: string, from: string): Error | null {
  try {
    require.resolve(peer, { paths: [require.resolve(from)] });
    return null;
  } catch (err) {
    if (notFound(err)) return err as Error;
    throw err;
  }
}

/**
 * The package whose module was not found, from Node's MODULE_NOT_FOUND error (`Cannot find module
 * 'nestjs-cls/dist/x'` gives `nestjs-cls`); undefined for any other error.
 */
export function missingPackage(err: unknown): string | undefined {
  if (!notFound(err)) return undefined;
  const request = /Cannot find module '([^']+)'/.exec((err as Error).message)?.[1];
  if (!request || request.startsWith('.') || request.startsWith('/')) return undefined;
  const parts = request.split('/');
  return request.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}
