/**
 * The flow reads that lib/db/dashboard-store.ts takes from here; they live in flows.ts. Kept only
 * until that file's import line points there.
 */
export { buildFlowQueries, type FlowQueries } from './flows';
