import * as pkg from '../../lib';

/**
 * The main entry point exports what the README documents and nothing else: the runtime, its DI
 * token, DEFAULTS and EMPTY_COUNTS are internals (issue 10, point 22). A new export is a decision
 * for this list and the README, not an accident of the barrel.
 */
describe('the public surface of nestjs-pg-queue', () => {
  it('exports exactly the documented values', () => {
    expect(Object.keys(pkg).sort()).toEqual(
      [
        'BatchError',
        'CancelJobError',
        'CompleteWithError',
        'DependencyError',
        'InjectQueue',
        'JobFinishedWithError',
        'JobNotFoundError',
        'JobParkedError',
        'StepError',
        'WaitTimeoutError',
        'JobTimeoutError',
        'LeaseLostError',
        'OnQueueEvent',
        'OnWorkerEvent',
        'PG_QUEUE_MODULE_OPTIONS',
        'PgQueueConfigError',
        'PgQueueError',
        'PgQueueMissingPeerError',
        'PgQueueModule',
        'PgQueuePayloadError',
        'Process',
        'Processor',
        'Queue',
        'QueueService',
        'ShutdownError',
        'SnoozeJobError',
        'UnrecoverableError',
        'ObliterateRefusedError',
        'UnknownJobNameError',
        'WaitForJobTimeoutError',
        'getQueueToken',
        'pgQueueMigrations',
      ].sort(),
    );
  });

  it("gives a Job both counts of attempts: ours (1-based) and BullMQ's attemptsMade (issue 24, point 8)", () => {
    // A type-level check: this file does not compile if either field leaves the public Job.
    const counts: readonly (keyof pkg.Job & keyof pkg.ActiveJob)[] = ['attempt', 'attemptsMade'];
    expect(counts).toHaveLength(2);
  });

  it('keeps the internals out', () => {
    for (const internal of ['PgQueueRuntime', 'PG_QUEUE_RUNTIME', 'DEFAULTS', 'EMPTY_COUNTS', 'Supervisor', 'JobStore']) {
      expect(pkg).not.toHaveProperty(internal);
    }
  });
});
