import { PgQueueConfigError } from '../errors';
import { quote } from '../input-text';

/** What `@nestjs/bullmq` users reach for, and what it is called here. */
const BULLMQ_NAMES: Readonly<Record<string, string>> = {
  delay: 'delayMs (milliseconds)',
  jobId: 'uniqueKey (at most one live job per key)',
  deduplication: 'uniqueKey (with replaceWaiting: true to debounce)',
  debounce: 'uniqueKey with replaceWaiting: true',
  removeOnComplete: 'the module option retention.completedMs (PgQueueModule.forRoot)',
  removeOnFail: 'the module option retention.failedMs (PgQueueModule.forRoot)',
  lifo: 'nothing: jobs run in priority, then runAt order; give a job a lower priority to run it first',
  repeat: 'registerQueue({ name, repeat: [{ name, cron }] }) or @Process({ name, cron })',
  timeout: 'timeoutMs',
  sizeLimit: 'the module option maxPayloadBytes',
  parent: 'queues.addFlow({ queue, name, payload, children }) for a tree, or add(name, payload, { dependsOn: [ids] })',
  failParentOnFailure: "the flow child's onFailure: 'fail-parent' (the default)",
  ignoreDependencyOnFailure: "the flow child's onFailure: 'ignore'",
  removeDependencyOnFailure: "the flow child's onFailure: 'ignore' (the parent then sees the failure in job.childResults())",
  continueParentOnFailure: "the flow child's onFailure: 'ignore'",
  keepLogs: 'the module option jobLogs.maxLines (PgQueueModule.forRoot): each job keeps its first lines',
  stackTraceLimit: "nothing: every attempt's error is kept with its stack",
  timestamp: 'nothing: createdAt is set by the database',
  prevMillis: 'nothing',
  telemetry: 'nothing: install @opentelemetry/api and register an SDK; enqueues and handlers are traced then',
};

/**
 * Throws on keys of `o` that are not in `known`, naming what to use instead: the option of the
 * same name in other casing, or ours for a `@nestjs/bullmq` option. `extra` says more about some keys.
 */
export function refuseUnknownKeys(
  where: string,
  o: object,
  known: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): void {
  let unknown: string[] | undefined;
  for (const k in o) if (Object.prototype.hasOwnProperty.call(o, k) && !known.includes(k)) (unknown ??= []).push(k);
  if (!unknown) return;
  const said = unknown.map((k) => {
    const hint = extra[k] ?? known.find((n) => n.toLowerCase() === k.toLowerCase()) ?? BULLMQ_NAMES[k];
    return hint ? `${quote(k)} (use ${hint})` : quote(k);
  });
  throw new PgQueueConfigError(`Unknown option(s) in ${where}: ${said.join(', ')}. Known options: ${known.join(', ')}.`);
}
