import type { JobStore } from '../db/job-store';
import type { EngineLogger } from './logger';

/** The first pause after a vacuum that freed little; doubles each time, up to MAX_PAUSE_MS. */
const FIRST_PAUSE_MS = 5_000;
const MAX_PAUSE_MS = 60_000;

/**
 * Keeps the jobs table's dead tuples low from the node that runs maintenance. Autovacuum visits
 * each database once per autovacuum_naptime (a minute by default) however aggressive the
 * table's own settings are, and a queue table turns over its whole content every few seconds:
 * the chaos suite measured 25,000 dead tuples 45 s into a run at 300 jobs/s, in a table
 * holding a few hundred live rows. A VACUUM of such a table takes milliseconds.
 *
 * While a long transaction elsewhere holds the xmin horizon, a vacuum frees nothing; then the
 * next one waits, 5 s at first and twice as long each time it frees little, up to a minute.
 */
export class JobsTableVacuum {
  private pauseMs = 0;
  private notBefore = 0;

  constructor(
    private readonly store: JobStore,
    private readonly atDeadTuples: number,
    private readonly logger: EngineLogger,
  ) {}

  /** Vacuums if the table needs it; returns the dead tuples before and after, or null. */
  async runOnce(now = Date.now()): Promise<{ before: number; after: number } | null> {
    if (this.atDeadTuples <= 0 || now < this.notBefore) return null;
    const { dead, live } = await this.store.jobsTableTuples();
    if (dead < Math.max(this.atDeadTuples, live / 10)) return null;
    await this.store.vacuumJobs();
    const after = (await this.store.jobsTableTuples()).dead;
    if (after > dead / 2) {
      this.pauseMs = Math.min(MAX_PAUSE_MS, this.pauseMs ? this.pauseMs * 2 : FIRST_PAUSE_MS);
      this.notBefore = Date.now() + this.pauseMs;
      this.logger.warn(
        `VACUUM of the jobs table left ${after} of ${dead} dead tuples: a long transaction is probably holding ` +
          `the xmin horizon back (see pg_stat_activity.backend_xmin). Next try in ${this.pauseMs / 1000} s.`,
      );
    } else {
      this.pauseMs = 0;
    }
    return { before: dead, after };
  }
}
