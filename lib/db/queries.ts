/**
 * The column lists and count fragments that lib/db/dashboard-queries.ts reads, from where they
 * now live (job-row.ts, reads.ts). Kept only until that file's import line points there; every
 * statement of the engine is in the file of its stage (job-store.ts lists them).
 */
export { byLayout, HISTORY_COLS, LIVE_COLS } from './job-row';
export { liveCountsSql, waitingChildrenSql } from './reads';
