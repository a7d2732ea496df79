import { connect, type Socket } from 'node:net';
import type { PgClientConfig } from '../core/pg-types';

// Why a connection could not be opened, asked only after it failed: pg says "timeout expired" or
// "Connection terminated unexpectedly" whether nothing answered, or a Redis or HTTP port did
// (a BullMQ user's { host, port } is a Redis port). One TCP connection that sends PostgreSQL's
// SSLRequest (8 bytes) tells them apart: a PostgreSQL server answers it with the single byte 'S'
// or 'N'; Redis waits for a newline that never comes, an HTTP server answers "HTTP/1.1 400".

/** Where a client config connects: host (a name, an address, or a socket directory) and port. */
export interface ConnectTarget {
  readonly host: string;
  readonly port: number;
}

/** What the probe found at a target. */
export type ProbeFinding =
  | { readonly kind: 'postgres' }
  | { readonly kind: 'refused' }
  | { readonly kind: 'unresolved' }
  | { readonly kind: 'no-tcp' }
  | { readonly kind: 'closed' }
  | { readonly kind: 'silent' }
  | { readonly kind: 'other'; readonly sent: string }
  | { readonly kind: 'error'; readonly message: string };

/** The host and port pg connects to with `config` (a connection string wins, as in pg). */
export function connectTarget(config: PgClientConfig): ConnectTarget {
  let host = config.host;
  let port: string | number | undefined = config.port;
  if (config.connectionString) {
    try {
      const url = new URL(config.connectionString);
      host = url.searchParams.get('host') ?? (url.hostname ? decodeURIComponent(url.hostname) : undefined);
      port = url.searchParams.get('port') ?? (url.port || undefined);
    } catch {
      // Not a URL (pg also takes "socket:" and key=value forms): say what the config says.
    }
  }
  host ||= process.env.PGHOST || 'localhost';
  port ||= process.env.PGPORT || 5432;
  return { host: host.replace(/^\[(.*)\]$/, '$1'), port: Number(port) };
}

/** The longest the probe after a failed connection waits. */
const PROBE_MAX_MS = 3000;

/** The bytes of PostgreSQL's SSLRequest: length 8, code 80877103. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]);

/** Connects once to `target`, sends an SSLRequest, and says what answered within `timeoutMs`. */
export function probePostgres(target: ConnectTarget, timeoutMs: number): Promise<ProbeFinding> {
  return new Promise((resolve) => {
    let connected = false;
    const socket: Socket = connect({ host: target.host, port: target.port });
    const done = (finding: ProbeFinding) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(finding);
    };
    const timer = setTimeout(() => done({ kind: connected ? 'silent' : 'no-tcp' }), timeoutMs);
    socket.once('connect', () => {
      connected = true;
      socket.write(SSL_REQUEST);
    });
    socket.once('data', (data: Buffer) => {
      const first = data[0];
      const pg = data.length === 1 && (first === 0x53 || first === 0x4e); // 'S' or 'N'
      done(pg ? { kind: 'postgres' } : { kind: 'other', sent: printable(data) });
    });
    socket.once('end', () => done({ kind: 'closed' }));
    socket.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED') return done({ kind: 'refused' });
      if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') return done({ kind: 'unresolved' });
      done(connected ? { kind: 'closed' } : { kind: 'error', message: err.message });
    });
  });
}

/** The first bytes an answer sent, quoted, with non-printable bytes as \xNN, at most 40 of them. */
function printable(data: Buffer): string {
  let out = '';
  for (const b of data.subarray(0, 40)) {
    out += b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
  }
  return `"${out}"${data.length > 40 ? '...' : ''}`;
}

/**
 * True for an error PostgreSQL itself sent (it has a SQLSTATE and a severity): the server was
 * reached, and its own message says what is wrong (a password, a database, a permission).
 */
export function isServerError(err: unknown): boolean {
  const e = err as { code?: unknown; severity?: unknown } | null;
  return typeof e?.severity === 'string' && typeof e.code === 'string';
}

/**
 * The sentence for a connection that could not be opened within `timeoutMs`: where, what
 * answered there (probed once more), and what to change. `pgMessage` is what pg said.
 */
export async function explainConnectFailure(config: PgClientConfig, timeoutMs: number, pgMessage: string): Promise<string> {
  const t = connectTarget(config);
  const at = `${t.host}:${t.port}`;
  const fix =
    'Point `connection` (or the DataSource) at the PostgreSQL server (port 5432 by default), or raise ' +
    'connectTimeoutMs if it is only slow to answer.';
  if (t.host.startsWith('/')) {
    return `nestjs-pg-queue cannot connect to PostgreSQL through the socket in ${t.host} (port ${t.port}): ${pgMessage}. ${fix}`;
  }
  // The failed connection already waited timeoutMs; the probe only tells what is there, and a
  // PostgreSQL server answers its 8 bytes at once, so it waits at most 3 s more.
  const found = await probePostgres(t, Math.min(timeoutMs, PROBE_MAX_MS));
  const what: Record<ProbeFinding['kind'], string> = {
    postgres: `PostgreSQL answers there, but opening a connection failed (${pgMessage}) within ${timeoutMs} ms`,
    refused: 'nothing listens there (connection refused)',
    unresolved: `the host name "${t.host}" does not resolve`,
    'no-tcp': `nothing answered within ${timeoutMs} ms (no TCP connection: a host that is down, or a firewall that drops packets)`,
    closed: 'something answered but it is not PostgreSQL (it accepted the connection, then closed it without a word)',
    silent:
      `something answered but it is not PostgreSQL (it accepted the connection, then said nothing to PostgreSQL's ` +
      `handshake within ${timeoutMs} ms: a Redis port does that)`,
    other: `something answered but it is not PostgreSQL (it sent ${found.kind === 'other' ? found.sent : ''})`,
    error: `the connection failed (${found.kind === 'error' ? found.message : ''})`,
  };
  return `nestjs-pg-queue cannot connect to PostgreSQL at ${at}: ${what[found.kind]}. ${fix}`;
}
