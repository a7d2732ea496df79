/**
 * The reads by id of the history, which lib/db/dashboard-queries.ts and dashboard-store.ts take
 * from here; they live in history/by-id.ts. Kept only until those files' import lines point there.
 */
export { historyByIdParamSql, HistoryLayoutCache, type HistoryLayout } from './history/by-id';
