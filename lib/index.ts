export { PgQueueModule } from './module/pg-queue.module';
export { PG_QUEUE_MODULE_OPTIONS } from './module/pg-queue.module-definition';
export { getQueueToken } from './core/tokens';
export type {
  PgQueueModuleOptions,
  PgQueueConnectionOptions,
  JobFailureLogging,
  RegisterQueueOptions,
  QueueGroupOptions,
  DataSourceLike,
  InjectionTokenLike,
} from './core/options/types';
export type { PgPoolConfig } from './core/pg-types';
export { Queue, type JobMap, type TransactionTarget } from './producer/queue';
export { QueueService } from './module/queue.service';
export type { RegisterQueueAsyncOptions } from './module/register-queue-async';
export type { GetJobsOptions, JobPage, PromoteJobsOptions } from './core/find-options';
export type { GetJobLogsOptions, JobLogsPage } from './core/job-logs';
export type { GroupCounts, GroupCountsOptions, GroupCountsOrder, QueueGroupCounts } from './core/group-counts';
export type { CleanOptions, CleanState, ObliterateOptions } from './core/clean';
export type {
  CancelJobsOptions,
  CancelJobsState,
  RemoveJobsOptions,
  RemoveJobsState,
  RetryJobsOptions,
  RetryJobsState,
} from './core/bulk-options';
export type {
  ActiveJob,
  BackoffOptions,
  BulkJob,
  ChildFailurePolicy,
  ChildResult,
  DeduplicationOptions,
  Dependency,
  EnqueueOptions,
  FlowJob,
  FlowJobOptions,
  FlowNode,
  Job,
  JobAttemptError,
  JobDefaults,
  JobFlow,
  JobHandler,
  JobOptions,
  JobProgress,
  JobState,
  QueueCounts,
  QueueJobDefaults,
  TransactionClient,
  TransactionManager,
} from './core/job';
export { Processor, type ProcessorOptions } from './decorators/processor.decorator';
export { Process } from './decorators/process.decorator';
export { InjectQueue } from './decorators/inject-queue.decorator';
export { OnQueueEvent } from './decorators/on-queue-event.decorator';
export { OnWorkerEvent, type WorkerEventName } from './decorators/on-worker-event.decorator';
export {
  JobFinishedWithError,
  JobNotFoundError,
  WaitForJobTimeoutError,
  type AddedJob,
  type LaggedEvent,
  type QueueEvent,
  type QueueEventMap,
  type QueueEventName,
  type QueueEvents,
  type WaitForJobOptions,
} from './core/queue-events';
export type { OutcomeKind, StalledJob } from './core/events';
export {
  PgQueueError,
  PgQueueConfigError,
  PgQueuePayloadError,
  UnknownJobNameError,
  JobTimeoutError,
  LeaseLostError,
  ShutdownError,
  CompleteWithError,
  CancelJobError,
  SnoozeJobError,
  UnrecoverableError,
  ObliterateRefusedError,
  PgQueueMissingPeerError,
  DependencyError,
} from './core/errors';
export {
  JobParkedError,
  StepError,
  WaitTimeoutError,
  type DurableSteps,
  type JobStep,
  type StepContext,
  type StepOptions,
  type TransactionalStepContext,
  type WaitForOptions,
} from './core/steps';
export type { FlowProducer } from './producer/flow';
export { pgQueueMigrations, type PgQueueMigrationClass } from './module/typeorm-migrations';
export type { RepeatOptions } from './core/cron-schedule';
export type { JobScheduler, JobSchedulerRepeat, JobSchedulerTemplate } from './core/job-scheduler';
export type { ProcessOptions, BatchProcessOptions, BatchProcessMethod } from './decorators/process.decorator';
export { BatchError, type BatchOptions, type BatchJobHandler } from './core/batch';
