// The options, by reader, live in ./options/: public types (types.ts), what the code reads after
// validation (resolved.ts), defaults (defaults.ts), module and queue checks (module-checks.ts),
// job option checks (job-checks.ts), unknown keys (unknown-keys.ts). This file only re-exports
// them for the importers outside core/, module/, discovery/ and decorators/, so the reshape of
// db/ and worker/ under way at the same time (issue 23) does not collide with an import-line
// change in 20-odd files; import from ./options/* directly in new code.
export type {
  DataSourceLike,
  InjectionTokenLike,
  JobFailureLogging,
  PgQueueConnectionOptions,
  PgQueueModuleOptions,
  RegisterQueueOptions,
} from './options/types';
export type { ResolvedBackoff, ResolvedJobDefaults, ResolvedPgQueueOptions, ResolvedQueueOptions } from './options/resolved';
export { DEFAULTS } from './options/defaults';
export { refuseUnknownKeys } from './options/unknown-keys';
export { MAX_DELAY_MS, resolveJobDefaults, resolveRunAt, type JobOptionsSource } from './options/job-checks';
export { resolveModuleOptions, resolveQueueOptions } from './options/module-checks';
export { validateConnectionName, validateJobName, validateQueueName, validateSchemaName } from './names';
