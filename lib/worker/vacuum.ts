import type { JobsTableSize, JobStore } from '../db/job-store';
import type { EngineLogger } from './logger';
import type { BackgroundService } from './service';

/** The first pause after a vacuum that freed little; doubles each time, up to MAX_PAUSE_MS. */
const FIRST_PAUSE_MS = 5_000;
const MAX_PAUSE_MS = 60_000;

/** The jobs table is analysed once its heap has grown this many times the size last recorded... */
const REPLAN_GROWTH = 2;
/**
 * ...and is at least this many pages (256 kB): below that a sequential scan costs little, and it
 * is what a plan made anew would choose anyway (made after an ANALYZE, the claim's plan scanned a
 * heap of 29 pages and took the primary key at 58; PostgreSQL 15).
 */
const REPLAN_MIN_PAGES = 32;

/**
 * Whether the cached plans on the jobs table were made for a much smaller heap than it has now.
 *
 * The claim and the completion are prepared statements, and PostgreSQL keeps a statement's
 * generic plan until the table's statistics change. Made while the table is small (an app booting
 * on an empty queue, or just after a VACUUM truncated the table), that plan finds the claimed ids
 * by a sequential scan of the heap, which is right for a page or two; but the heap grows between
 * vacuums (every job leaves dead versions) and the plan stays. In the latency bench (an idle
 * worker, 200 jobs/s for 10 s from an empty table) the claim read 16 shared buffers per call at
 * first and 87 at the end, 39-52 on average against the raw loop's 12, with a mean execution of
 * 0.13-0.17 ms against 0.06 ms; the completion the same (pg_stat_statements, `bench --pgss`, 3
 * runs). The same run with an ANALYZE every 2.5 s: 18 buffers and 0.10 ms per claim, 16 and 0.09
 * ms per completion; with this check in the maintenance pass (every 5 s), 21-23 buffers and
 * 0.10-0.11 ms per claim (3 runs interleaved with the build before it). A VACUUM or ANALYZE records the size (pg_class.relpages) and makes every
 * connection plan its statements again, so one ANALYZE per doubling keeps plans and heap in step.
 */
export function plansOutgrown(size: Pick<JobsTableSize, 'pages' | 'recordedPages'>): boolean {
  return size.pages >= REPLAN_MIN_PAGES && size.pages >= REPLAN_GROWTH * size.recordedPages;
}

/**
 * Keeps the jobs table's dead tuples low from the node that runs maintenance, and its cached
 * plans made for the table's size (`plansOutgrown`). Autovacuum visits
 * each database once per autovacuum_naptime (a minute by default) however aggressive the
 * table's own settings are, and a queue table turns over its whole content every few seconds:
 * the chaos suite measured 25,000 dead tuples 45 s into a run at 300 jobs/s, in a table
 * holding a few hundred live rows. A VACUUM of such a table takes milliseconds.
 *
 * While a long transaction elsewhere holds the xmin horizon, a vacuum frees nothing; then the
 * next one waits, 5 s at first and twice as long each time it frees little, up to a minute.
 */
export class JobsTableVacuum implements BackgroundService {
  private pauseMs = 0;
  private notBefore = 0;

  constructor(
    private readonly store: JobStore,
    private readonly atDeadTuples: number,
    private readonly logger: EngineLogger,
  ) {}

  /** Nothing of its own to start: the rescue pass runs it, on the elected node. */
  start(): void {}

  /** Nothing to stop: a vacuum runs inside a rescue pass, which shutdown waits for. */
  stop(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * Vacuums if the table needs it; returns the dead tuples before and after, or null. Otherwise
   * analyses it if the heap outgrew the cached plans (`plansOutgrown`), also while vacuums pause:
   * a held horizon grows the heap fastest.
   */
  async runOnce(now = Date.now()): Promise<{ before: number; after: number } | null> {
    if (this.atDeadTuples <= 0) return null;
    const size = await this.store.jobsTableTuples();
    const { dead, live } = size;
    if (now < this.notBefore || dead < Math.max(this.atDeadTuples, live / 10)) {
      if (plansOutgrown(size)) await this.store.analyzeJobs();
      return null;
    }
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
