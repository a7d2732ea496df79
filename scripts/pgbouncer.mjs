// PgBouncer in front of a PostgreSQL server, for the test suite and the benchmarks.
//
//   import { startPgBouncer } from './pgbouncer.mjs';
//   const bouncer = await startPgBouncer({ serverUrl, poolSize: 10 });
//   ... connect to bouncer.urlFor(databaseUrl) ...
//   await bouncer.stop();
//
// Runs the `pgbouncer` binary found on PATH (or in /usr/sbin, where Debian puts it), in
// transaction mode, on a free 127.0.0.1 port, from a config this script writes into a fresh temp
// dir (removed on stop): no system service, no /etc file is touched. `* = host=... port=...`
// serves every database of the server, so the per-test-file databases (created directly on the
// server: CREATE DATABASE cannot run through a transaction pool) are reachable by name.
//
// Auth: clients are trusted (auth_type = trust: only local test processes connect), and the
// server login uses the password of `serverUrl`, written to the auth file PgBouncer needs for
// trust too. That password works against md5, scram-sha-256 and trust servers alike.
//
// Root: PgBouncer 1.18 refuses to run as root ("FATAL PgBouncer should not run as root"), so as
// root it is started with `-u nobody` and its temp dir is handed to that user. Prepared
// statements: Debian bookworm ships 1.18, before protocol-level prepared statement support
// (1.21), so clients must not prepare (the queue's `preparedStatements: false`).

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findFreePort } from './pg-server.mjs';

const RUN_AS = 'nobody';
const START_TIMEOUT_MS = 15_000;

/** The pgbouncer binary, or null when it is not installed. */
export function findPgBouncer() {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/local/sbin'];
  for (const dir of dirs) {
    const file = path.join(dir, 'pgbouncer');
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      /* not here */
    }
  }
  return null;
}

const quoteIni = (s) => String(s).replace(/[\r\n]/g, '');
const quoteAuth = (s) => `"${String(s).replace(/"/g, '""')}"`;

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * Starts PgBouncer in front of the server of `serverUrl`.
 *
 * @param {object} opts
 * @param {string} opts.serverUrl       a URL of the real server (its user and password log PgBouncer in)
 * @param {number} [opts.poolSize=10]   default_pool_size: server connections per database and user
 * @param {number} [opts.maxClientConn=2000]
 * @param {string} [opts.poolMode='transaction']
 * @returns {Promise<{ port: number, pid: number, poolSize: number, logFile: string, urlFor(url: string): string,
 *   adminUrl: string, stop(): Promise<void> }>}
 *   `urlFor` turns a URL of the real server (any database) into the same URL through PgBouncer;
 *   `adminUrl` is PgBouncer's admin console (SHOW POOLS, SHOW SERVERS).
 */
export async function startPgBouncer({ serverUrl, poolSize = 10, maxClientConn = 2000, poolMode = 'transaction' }) {
  const bin = findPgBouncer();
  if (!bin) {
    throw new Error(
      'pgbouncer is not installed (looked on PATH and in /usr/sbin). Install it (Debian/Ubuntu: ' +
        'apt-get install pgbouncer; .ci/run does that) to run the suite through PgBouncer.',
    );
  }
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || os.userInfo().username);
  const password = decodeURIComponent(server.password);
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'pgq-pgbouncer-'));
  const logFile = path.join(dir, 'pgbouncer.log');
  const root = process.getuid?.() === 0;

  let child = null;
  let exited = null;
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  const onProcessExit = () => {
    child?.kill('SIGKILL');
    remove();
  };
  process.on('exit', onProcessExit);
  try {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const port = await findFreePort();
      const ini = [
        '[databases]',
        `* = host=${quoteIni(server.hostname)} port=${quoteIni(server.port || '5432')}`,
        '',
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${path.join(dir, 'users.txt')}`,
        `admin_users = ${quoteIni(user)}`,
        `stats_users = ${quoteIni(user)}`,
        `pool_mode = ${poolMode}`,
        `default_pool_size = ${poolSize}`,
        'min_pool_size = 0',
        'reserve_pool_size = 0',
        `max_client_conn = ${maxClientConn}`,
        'server_lifetime = 3600',
        'server_idle_timeout = 60',
        // A client waiting for a server fails after 10 s instead of 120, and a failed server login
        // is retried after 1 s: a test whose database was just dropped gets an error, not a hang.
        'query_wait_timeout = 10',
        'server_login_retry = 1',
        // Parameters node-postgres sends at startup that PgBouncer 1.18 does not track itself.
        'ignore_startup_parameters = extra_float_digits,options',
        `logfile = ${logFile}`,
        `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
        'log_connections = 0',
        'log_disconnections = 0',
        '',
      ].join('\n');
      await fsp.writeFile(path.join(dir, 'pgbouncer.ini'), ini);
      await fsp.writeFile(path.join(dir, 'users.txt'), `${quoteAuth(user)} ${quoteAuth(password)}\n`, { mode: 0o600 });
      if (root) {
        const uid = Number(execFileSync('id', ['-u', RUN_AS], { encoding: 'utf8' }));
        const gid = Number(execFileSync('id', ['-g', RUN_AS], { encoding: 'utf8' }));
        for (const f of ['', 'pgbouncer.ini', 'users.txt']) await fsp.chown(path.join(dir, f), uid, gid);
      }
      const args = [...(root ? ['-u', RUN_AS] : []), path.join(dir, 'pgbouncer.ini')];
      child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      child.once('error', (err) => (stderr += err.message));
      const deadline = Date.now() + START_TIMEOUT_MS;
      let up = false;
      while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
        if (await canConnect(port)) {
          up = true;
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      if (up) {
        const urlFor = (url) => {
          const u = new URL(url);
          u.hostname = '127.0.0.1';
          u.port = String(port);
          return u.toString();
        };
        const admin = new URL(urlFor(serverUrl));
        admin.pathname = '/pgbouncer';
        let stopping = null;
        const stop = () =>
          (stopping ??= (async () => {
            if (child.exitCode === null && child.signalCode === null) {
              child.kill('SIGINT'); // immediate shutdown
              const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
              await exited;
              clearTimeout(timer);
            }
            remove();
            process.removeListener('exit', onProcessExit);
          })());
        return { port, pid: child.pid, poolSize, logFile, urlFor, adminUrl: admin.toString(), stop };
      }
      child.kill('SIGKILL');
      await exited;
      const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
      if (/Address already in use/i.test(log) && attempt < 3) continue; // lost a port race
      throw new Error(`pgbouncer did not start on port ${port}:\n${(stderr + log).trim().split('\n').slice(-20).join('\n')}`);
    }
    throw new Error('pgbouncer did not start');
  } catch (err) {
    child?.kill('SIGKILL');
    remove();
    process.removeListener('exit', onProcessExit);
    throw err;
  }
}
