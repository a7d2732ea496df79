import { createHash } from 'crypto';
import type { SqlExecutor } from './executor';

/**
 * Who holds one of the queue's advisory locks, when a claim timed out waiting for it or a
 * maintenance step found it taken. Advisory locks live in one namespace per database that any
 * role able to connect can take: an analyst's session, another service or a stray script holding
 * a key (by accident or not) would otherwise stall the boot, a limited queue's claims or the
 * maintenance without a word. What is named here is what pg_stat_activity shows this role: pid,
 * role and application always; the transaction's start only to a role allowed to see the
 * session (the same role, a member of pg_read_all_stats, or a superuser).
 */
export interface LockHolder {
  readonly pid: number;
  readonly role: string;
  readonly application: string;
  /** When the holder's transaction (else its session) began; null when this role may not see it. */
  readonly since: Date | null;
  /** The holder runs as another role, or under another application_name, than this session: not a node of this app. */
  readonly foreign: boolean;
}

/**
 * The sessions holding the advisory lock `$1` (a bigint key) in this database, granted, oldest
 * first. A bigint key is stored as classid (high 32 bits), objid (low 32 bits), objsubid 1.
 */
const HOLDERS_SQL = `
  SELECT a.pid, coalesce(a.usename::text, '?') AS role, coalesce(a.application_name, '') AS application,
         coalesce(a.xact_start, a.backend_start) AS since,
         (a.usename IS DISTINCT FROM current_user::name
           OR a.application_name IS DISTINCT FROM pg_catalog.current_setting('application_name')) AS is_foreign
  FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
    AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid
    AND l.pid <> pg_catalog.pg_backend_pid()
  ORDER BY since NULLS LAST`;

/** The sessions that hold the advisory lock `key` (see HOLDERS_SQL). */
export async function advisoryLockHolders(db: SqlExecutor, key: string): Promise<LockHolder[]> {
  const rows = await db.query<{ pid: number; role: string; application: string; since: Date | null; is_foreign: boolean }>(
    HOLDERS_SQL,
    [key],
  );
  return rows.map((r) => ({
    pid: Number(r.pid),
    role: r.role,
    application: r.application,
    since: r.since,
    foreign: r.is_foreign,
  }));
}

/** `pid 123 (role "x", application "psql", since 2026-...)`: what an error or a warning names. */
export function describeHolder(h: LockHolder): string {
  const since = h.since ? `, since ${h.since.toISOString()}` : '';
  return `pid ${h.pid} (role "${h.role}", application "${h.application}"${since})`;
}

/** The holders, named, or what to look at when none is visible any more (the lock was released meanwhile). */
export function describeHolders(holders: readonly LockHolder[]): string {
  if (!holders.length) return 'a session no longer holding it (released meanwhile; see pg_locks)';
  return holders.map(describeHolder).join(', ');
}

/** The migration lock's key: the same 60-bit value migrator.ts computes in SQL, so older nodes and this one share it. */
export function migrationLockKey(schema: string): string {
  const hex = createHash('md5').update(`nestjs-pg-queue:migrate:${schema}`).digest('hex').slice(0, 15);
  return BigInt(`0x${hex}`).toString();
}

/**
 * Warns, at most once per `everyMs` per lock, that a session of another role or application
 * holds one of the queue's try-locks (maintenance, history upkeep), so the work it guards is
 * skipped while it does. A node of this app holding it is the election working: no warning.
 */
export class ForeignLockWarnings {
  private readonly last = new Map<string, number>();

  constructor(
    private readonly warn: (message: string) => void,
    private readonly everyMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Reports the foreign holders of `lock` (rate-limited); answers whether any was foreign. */
  report(lock: string, holders: readonly LockHolder[], skipped: string): boolean {
    const foreign = holders.filter((h) => h.foreign);
    if (!foreign.length) return false;
    const t = this.now();
    const prev = this.last.get(lock);
    if (prev !== undefined && t - prev < this.everyMs) return true;
    this.last.set(lock, t);
    this.warn(
      `pg-queue: the ${lock} lock is held by ${foreign.map(describeHolder).join(', ')}, a session that is not a node of ` +
        `this app (another role or application_name), so ${skipped} is skipped while it holds it. End that session ` +
        `(SELECT pg_catalog.pg_terminate_backend(pid)) and find out why it takes the queue's advisory locks (docs/security.md).`,
    );
    return true;
  }
}
