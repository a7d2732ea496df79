export { PgQueueModule } from './pg-queue.module';
export { PG_QUEUE_MODULE_OPTIONS } from './pg-queue.module-definition';
export { getQueueToken, PG_QUEUE_RUNTIME } from './pg-queue.constants';
export type {
  PgQueueModuleOptions,
  RegisterQueueOptions,
  DataSourceLike,
  InjectionTokenLike,
} from './pg-queue.options';
export { DEFAULTS } from './pg-queue.options';
export { Queue, EMPTY_COUNTS, type JobMap, type TransactionTarget } from './queue';
export { QueueService } from './queue.service';
export type { PgQueueRuntime } from './pg-queue.runtime';
export type {
  ActiveJob,
  BackoffOptions,
  BulkJob,
  EnqueueOptions,
  Job,
  JobAttemptError,
  JobHandler,
  JobOptions,
  JobState,
  QueueCounts,
  TransactionClient,
  TransactionManager,
} from './job';
export { Processor, type ProcessorOptions } from './decorators/processor.decorator';
export { Process } from './decorators/process.decorator';
export { InjectQueue } from './decorators/inject-queue.decorator';
export { OnQueueEvent, type QueueEventName } from './decorators/on-queue-event.decorator';
export type { StalledJob } from './db/job-store';
export type { SupervisorEventMap } from './worker/supervisor';
export {
  PgQueueError,
  PgQueueConfigError,
  PgQueuePayloadError,
  UnknownJobNameError,
  JobTimeoutError,
  LeaseLostError,
  ShutdownError,
  CancelJobError,
  SnoozeJobError,
  PgQueueMissingPeerError,
} from './errors';
export { pgQueueMigrations } from './typeorm-migrations';
export type { RepeatOptions } from './cron-schedule';
export type { ProcessOptions } from './decorators/process.decorator';
