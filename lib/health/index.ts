/**
 * The `nestjs-pg-queue/health` entry point: needs `@nestjs/terminus`, which the main entry
 * point does not, so nothing in `lib/index.ts` may import from here.
 */
import './peer'; // first: names @nestjs/terminus if it is missing
export { PgQueueHealthIndicator } from './pg-queue.health';
export {
  evaluateHealth,
  groupChecksFor,
  validateHealthThresholds,
  HEALTH_DEFAULTS,
  type PgQueueHealthDetails,
  type PgQueueHealthEvaluation,
  type PgQueueHealthInput,
  type PgQueueHealthThresholds,
  type PgQueueQueueHealth,
  type PgQueueQueueThresholds,
} from './health-evaluation';
