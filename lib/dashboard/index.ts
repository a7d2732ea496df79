// The `nestjs-pg-queue/dashboard` entry point: a Nest module with controllers, which the main
// entry point does not load, so apps that do not mount the dashboard load none of it.
export { PgQueueDashboardModule } from './pg-queue-dashboard.module';
export { DashboardService, type JobSummary, type TimelineEntry } from './dashboard.service';
export { DashboardInputError } from './dashboard-input';
export {
  DASHBOARD_DEFAULTS,
  PG_QUEUE_DASHBOARD_OPTIONS,
  type DashboardAccessContext,
  type DashboardAction,
  type DashboardRequest,
  type PgQueueDashboardAsyncOptions,
  type PgQueueDashboardFactoryOptions,
  type PgQueueDashboardOptions,
} from './dashboard.options';
