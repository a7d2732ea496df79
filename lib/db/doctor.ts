import type { SqlExecutor } from './executor';
import { schemaSql } from './store-context';

/** A session of this database whose snapshot (backend_xmin) holds the vacuum horizon back. */
export interface XminHolder {
  readonly pid: number;
  readonly role: string;
  readonly application: string;
  /** `idle in transaction`, `active`, ...; null when this role may not see it. */
  readonly state: string | null;
  /** When its transaction began; null when this role may not see it. */
  readonly xactStart: Date | null;
  /** How old that transaction is, in ms (database clock); null when this role may not see it. */
  readonly ageMs: number | null;
  /** Transactions since its xmin (age(backend_xmin)). */
  readonly xidAge: number;
}

/** A replication slot or a prepared transaction that holds the horizon back. */
export interface HorizonHolder {
  readonly kind: 'replication slot' | 'prepared transaction';
  readonly name: string;
  /** Transactions since the xmin it holds. */
  readonly xidAge: number;
  /** When it was prepared (prepared transactions); null for a slot. */
  readonly since: Date | null;
  /** Slots: whether a client is streaming from it now; prepared transactions: null. */
  readonly active: boolean | null;
}

/** A row of the nodes registry whose heartbeat stopped (seen more than 3 of its intervals ago). */
export interface SilentNode {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly lastSeenAt: Date;
  readonly silentMs: number;
  readonly heartbeatMs: number;
  /** Jobs still locked by it (active): they come back when their lease expires. */
  readonly running: number;
}

/** Vacuum figures of the jobs table the statistics keep (the dead and live counts are vacuum.ts's). */
export interface JobsVacuumStats {
  readonly lastVacuum: Date | null;
  readonly lastAutovacuum: Date | null;
}

/**
 * What `nestjs-pg-queue doctor` and `status` read beyond the dashboard's and the vacuum
 * service's statements. Catalog and statistics views only, never the jobs themselves, except
 * the count of a silent node's running jobs (the active partial index).
 */
export function doctorStatements(schema: string) {
  const { s, jobs } = schemaSql(schema, false);
  return {
    /**
     * Sessions of this database holding a snapshot, oldest xmin first (other databases' sessions
     * do not hold back the vacuum of our tables). The start and state show only to a role allowed
     * to see the session (pg_stat_activity). $1 how many at most
     */
    xminHolders: `
      SELECT a.pid, coalesce(a.usename::text, '?') AS role, coalesce(a.application_name, '') AS application,
             a.state, a.xact_start,
             extract(epoch FROM clock_timestamp() - a.xact_start)::float8 * 1000::float8 AS age_ms,
             pg_catalog.age(a.backend_xmin) AS xid_age
      FROM pg_catalog.pg_stat_activity a
      WHERE a.backend_xmin IS NOT NULL AND a.pid <> pg_backend_pid() AND a.datname = current_database()
      ORDER BY xid_age DESC LIMIT $1`,

    /** Replication slots and prepared transactions (of this database) holding an xmin, oldest first. */
    otherHolders: `
      SELECT 'replication slot' AS kind, slot_name::text AS name,
             GREATEST(pg_catalog.age(xmin), pg_catalog.age(catalog_xmin)) AS xid_age, NULL::timestamptz AS since, active
      FROM pg_catalog.pg_replication_slots WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
      UNION ALL
      SELECT 'prepared transaction', gid, pg_catalog.age(transaction), prepared, NULL
      FROM pg_catalog.pg_prepared_xacts WHERE database = current_database()
      ORDER BY xid_age DESC`,

    /** Nodes whose heartbeat stopped, with how many jobs they still hold. */
    silentNodes: `
      SELECT n.id, n.host, n.pid, n.last_seen_at, n.heartbeat_ms,
             extract(epoch FROM now() - n.last_seen_at)::float8 * 1000::float8 AS silent_ms,
             (SELECT count(*) FROM ${jobs} j WHERE j.state = 'active' AND j.locked_by = n.id)::int AS running
      FROM ${s}.nodes n
      WHERE n.last_seen_at <= now() - (3 * n.heartbeat_ms)::float8 * interval '1 millisecond'
      ORDER BY n.last_seen_at LIMIT 1000`,

    /** When the jobs table was last vacuumed, by hand and by autovacuum. $1 the table, as text */
    jobsVacuumStats: `
      SELECT last_vacuum, last_autovacuum FROM pg_catalog.pg_stat_user_tables WHERE relid = $1::regclass::oid`,

    /**
     * Sessions of this database whose last statement was the LISTEN of this schema's channel and
     * that are idle since: the apps' listener connections, as far as this role sees them. $1 the
     * LISTEN statement's text
     */
    listeners: `
      SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity
      WHERE datname = current_database() AND state = 'idle' AND query = $1::text`,
  };
}

/** The doctor's reads, on any executor (the CLI's pool). */
export class DoctorReads {
  private readonly q: ReturnType<typeof doctorStatements>;

  constructor(
    private readonly db: SqlExecutor,
    private readonly schema: string,
  ) {
    this.q = doctorStatements(schema);
  }

  async xminHolders(limit = 20): Promise<XminHolder[]> {
    const rows = await this.db.query<{
      pid: number;
      role: string;
      application: string;
      state: string | null;
      xact_start: Date | null;
      age_ms: number | null;
      xid_age: number;
    }>(this.q.xminHolders, [limit]);
    return rows.map((r) => ({
      pid: Number(r.pid),
      role: r.role,
      application: r.application,
      state: r.state,
      xactStart: r.xact_start,
      ageMs: r.age_ms === null ? null : Math.max(0, Math.round(r.age_ms)),
      xidAge: Number(r.xid_age),
    }));
  }

  async otherHolders(): Promise<HorizonHolder[]> {
    const rows = await this.db.query<{
      kind: HorizonHolder['kind'];
      name: string;
      xid_age: number;
      since: Date | null;
      active: boolean | null;
    }>(this.q.otherHolders, []);
    return rows.map((r) => ({ kind: r.kind, name: r.name, xidAge: Number(r.xid_age), since: r.since, active: r.active }));
  }

  async silentNodes(): Promise<SilentNode[]> {
    const rows = await this.db.query<{
      id: string;
      host: string;
      pid: number;
      last_seen_at: Date;
      heartbeat_ms: number;
      silent_ms: number;
      running: number;
    }>(this.q.silentNodes, []);
    return rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: r.pid,
      lastSeenAt: r.last_seen_at,
      heartbeatMs: r.heartbeat_ms,
      silentMs: Math.round(r.silent_ms),
      running: r.running,
    }));
  }

  async jobsVacuumStats(): Promise<JobsVacuumStats> {
    const rows = await this.db.query<{ last_vacuum: Date | null; last_autovacuum: Date | null }>(this.q.jobsVacuumStats, [
      `${schemaSql(this.schema).s}.jobs`,
    ]);
    return { lastVacuum: rows[0]?.last_vacuum ?? null, lastAutovacuum: rows[0]?.last_autovacuum ?? null };
  }

  /** How many sessions LISTEN on `listenSql` (the text lib/db/listen.ts sends), as far as this role sees. */
  async listeners(listenSql: string): Promise<number> {
    const [r] = await this.db.query<{ n: number }>(this.q.listeners, [listenSql]);
    return r.n;
  }
}
