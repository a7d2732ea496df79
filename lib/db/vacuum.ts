import { escapeIdentifier } from 'pg';
import type { SchemaSql, StoreContext } from './store-context';

/** The jobs table's row versions (statistics) and its size in pages, now and as last recorded. */
export interface JobsTableSize {
  readonly dead: number;
  readonly live: number;
  readonly pages: number;
  /** pg_class.relpages: the size the last VACUUM or ANALYZE recorded (0 before the first). */
  readonly recordedPages: number;
}

/** What the vacuum service reads and runs on the jobs table. */
export function vacuumStatements({ jobs }: SchemaSql) {
  return {
    /**
     * Dead and live row versions of the jobs table, from the cumulative statistics (about a
     * second behind); its size in pages now, and as the last VACUUM or ANALYZE recorded it
     * (pg_class.relpages: when the cached plans were last invalidated). $1 the table, as text
     */
    jobsTableTuples: `
      SELECT s.n_dead_tup::float8 AS dead, s.n_live_tup::float8 AS live,
             (pg_catalog.pg_relation_size(s.relid) / pg_catalog.current_setting('block_size')::int)::float8 AS pages,
             c.relpages::float8 AS recorded_pages
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relid = $1::regclass::oid`,

    /** Outside any transaction (VACUUM refuses one); SKIP_LOCKED: never wait on a lock for it. */
    vacuumJobs: `VACUUM (SKIP_LOCKED) ${jobs}`,

    /** New statistics, so every connection replans its cached statements on the jobs table (vacuum.ts says why). */
    analyzeJobs: `ANALYZE (SKIP_LOCKED) ${jobs}`,
  };
}

/** The jobs table's upkeep, on pool connections (never inside a transaction). */
export class Vacuum {
  private readonly q: ReturnType<typeof vacuumStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = vacuumStatements(ctx.sql);
  }

  /**
   * Dead and live row versions of the jobs table (statistics, about a second old), and its size
   * in pages: now, and as the last VACUUM or ANALYZE recorded it.
   */
  async jobsTableTuples(): Promise<JobsTableSize> {
    const { rows } = await this.ctx.pool.query<{ dead: number; live: number; pages: number; recorded_pages: number }>(
      this.q.jobsTableTuples,
      [`${escapeIdentifier(this.ctx.schema)}.jobs`],
    );
    const r = rows[0];
    return r
      ? { dead: r.dead, live: r.live, pages: r.pages, recordedPages: r.recorded_pages }
      : { dead: 0, live: 0, pages: 0, recordedPages: 0 };
  }

  /** VACUUM of the jobs table, on a pool connection (never inside a transaction). */
  async vacuumJobs(): Promise<void> {
    await this.ctx.pool.query(this.q.vacuumJobs);
  }

  /** ANALYZE of the jobs table: new statistics, and every cached plan on it made again. */
  async analyzeJobs(): Promise<void> {
    await this.ctx.pool.query(this.q.analyzeJobs);
  }
}
