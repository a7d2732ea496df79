import type { Queue } from '../../producer/queue';
import type { CancelJobsState, RemoveJobsState, RetryJobsState } from '../../core/bulk-options';
import { list, parseDuration, required, str, UsageError, type Flags, type FlagValues } from '../args';
import { EXIT, type Command, type CommandRun } from '../command';
import type { CliDatabase } from '../database';
import { table } from '../output';

/** What one id's change came to. */
interface IdResult {
  readonly id: string;
  readonly queue: string | null;
  readonly changed: boolean;
  /** What happened, or why nothing did. */
  readonly outcome: string;
}

/** One of the by-id changes: the Queue call, and how its answer reads. */
interface ByIdChange {
  readonly verb: string;
  apply(queue: Queue, id: string): Promise<{ changed: boolean; outcome: string }>;
}

const BY_ID: Record<'retry' | 'remove' | 'cancel' | 'promote', ByIdChange> = {
  retry: {
    verb: 'retried',
    apply: async (q, id) =>
      (await q.retry(id)) ? { changed: true, outcome: 'retried' } : { changed: false, outcome: 'not finished (or gone)' },
  },
  remove: {
    verb: 'removed',
    apply: async (q, id) =>
      (await q.remove(id))
        ? { changed: true, outcome: 'removed' }
        : { changed: false, outcome: 'running (cancel it first) or gone' },
  },
  cancel: {
    verb: 'cancelled',
    apply: async (q, id) => {
      const r = await q.cancel(id);
      return r ? { changed: true, outcome: r } : { changed: false, outcome: 'not live (finished already, or gone)' };
    },
  },
  promote: {
    verb: 'promoted',
    apply: async (q, id) =>
      (await q.promote(id)) ? { changed: true, outcome: 'promoted (due now)' } : { changed: false, outcome: 'not delayed' },
  },
};

/**
 * Changes each id with its queue's own call (retry, remove, cancel, promote): the queue from
 * --queue, else the job's own (read first). An id no job has is reported, not an error of the run.
 */
async function changeIds(
  db: CliDatabase,
  ids: readonly string[],
  queueName: string | undefined,
  change: ByIdChange,
): Promise<IdResult[]> {
  const out: IdResult[] = [];
  for (const id of ids) {
    const queue = queueName ?? (await db.store.getJob(id))?.queue;
    if (queue === undefined) {
      out.push({ id, queue: null, changed: false, outcome: 'no such job' });
      continue;
    }
    out.push({ id, queue, ...(await change.apply(db.queue(queue), id)) });
  }
  return out;
}

function printIds(run: CommandRun, results: readonly IdResult[], verb: string): number {
  const changed = results.filter((r) => r.changed).length;
  run.print({ changed, results }, () =>
    [
      table(
        ['ID', 'QUEUE', 'RESULT'],
        results.map((r) => [r.id, r.queue ?? '-', r.outcome]),
      ),
      '',
      `${changed} of ${results.length} job(s) ${verb}.`,
    ].join('\n'),
  );
  // Some id not changed is worth a non-zero exit to a script: it asked for something that did not happen.
  return changed === results.length ? EXIT.ok : EXIT.failed;
}

/** The filter flags of a command, checked to be given only without ids. */
function filterGiven(values: FlagValues, keys: readonly string[]): boolean {
  return keys.some((k) => values[k] !== undefined);
}

const QUEUE: Flags = {
  queue: { type: 'string', arg: '<name>', help: 'the queue (required for a filter; with ids, checks each is of it)' },
};
const NAME: Flags = { name: { type: 'string', arg: '<job name>', help: 'filter: only jobs of this job name' } };
const OLDER: Flags = {
  'older-than': { type: 'string', arg: '<duration>', help: 'filter: only jobs finished longer ago than this (1d, 12h, 30m)' },
};

/** The states of a filter, which must name at least one (a filter never means "every job" by omission). */
function filterStates(command: string, values: FlagValues): string[] {
  const states = list(values, 'state');
  if (!states.length) throw new UsageError(`\`${command}\` needs job ids, or --queue and --state (the states to act on).`);
  return states;
}

/** The name and finishedBefore of a filter, from --name and --older-than (this machine's clock). */
function filterOf(values: FlagValues): { name?: string; finishedBefore?: Date } {
  const name = str(values, 'name');
  const older = str(values, 'older-than');
  return {
    ...(name !== undefined ? { name } : {}),
    ...(older !== undefined ? { finishedBefore: new Date(Date.now() - parseDuration('older-than', older)) } : {}),
  };
}

const retryCommand: Command = {
  name: 'jobs retry',
  summary: 'run finished jobs again: by id, or by filter (queue.retryJobs)',
  usage:
    'jobs retry <id...> [--queue <name>] | jobs retry --queue <name> --state failed|cancelled|completed [--name <job name>] [--older-than <duration>]',
  details: [
    'By id: queue.retry(id) for each (a failed, cancelled or completed job goes back to waiting under its id).',
    'By filter: queue.retryJobs({ state, name, finishedBefore }): every job of the queue in that finished',
    'state (of one job name; finished more than --older-than ago), a thousand per statement, each its own',
    'short transaction, the workers woken.',
    'Exit code 1 when an id given was not retried.',
  ].join('\n'),
  flags: {
    ...QUEUE,
    state: { type: 'string', arg: '<state>', help: 'filter: failed, cancelled or completed' },
    ...NAME,
    ...OLDER,
  },
  positionals: { min: 0, max: 1000, name: 'job ids' },
  async run(run) {
    const { values, positionals, db } = run;
    if (positionals.length) {
      if (filterGiven(values, ['state', 'name', 'older-than']))
        throw new UsageError('`jobs retry` takes ids or a filter (--state, --name), not both.');
      return printIds(run, await changeIds(db, positionals, str(values, 'queue'), BY_ID.retry), 'retried');
    }
    const queue = db.queue(requiredQueue(run, 'jobs retry'));
    const [state, ...more] = list(values, 'state');
    if (state === undefined || more.length)
      throw new UsageError('`jobs retry --queue <name>` needs one --state: failed, cancelled or completed.');
    const n = await queue.retryJobs({ state: state as RetryJobsState, ...filterOf(values) });
    run.print({ queue: queue.name, retried: n }, () => `${n} ${state} job(s) of queue "${queue.name}" back to waiting.`);
    return EXIT.ok;
  },
};

const removeCommand: Command = {
  name: 'jobs remove',
  summary: 'delete waiting, delayed or finished jobs by id (never a running one)',
  usage:
    'jobs remove <id...> [--queue <name>] --yes | jobs remove --queue <name> --state <state>[,...] [--name <job name>] [--older-than <duration>] --yes',
  details: [
    'By id: queue.remove(id) for each; exit code 1 when an id given was not removed. A running job is never removed: cancel it first.',
    'By filter: queue.removeJobs({ states, name, finishedBefore }) over waiting, delayed, waiting-children, completed,',
    'failed or cancelled jobs, a thousand per statement, each its own short transaction.',
  ].join('\n'),
  flags: {
    ...QUEUE,
    state: { type: 'string', multiple: true, arg: '<state>', help: 'filter: the states to remove from' },
    ...NAME,
    ...OLDER,
  },
  positionals: { min: 0, max: 1000, name: 'job ids' },
  destructive: true,
  confirmText: ({ positionals, values }) =>
    positionals.length === 0
      ? `Remove the ${filterStates('jobs remove', values).join(', ')} jobs of queue "${required('jobs remove', values, 'queue')}"${values.name ? ` named ${String(values.name)}` : ''}?`
      : `Remove ${positionals.length} job(s) (${positionals.slice(0, 5).join(', ')}${positionals.length > 5 ? ', ...' : ''})?`,
  async run(run) {
    if (run.positionals.length) {
      if (filterGiven(run.values, ['state', 'name', 'older-than']))
        throw new UsageError('`jobs remove` takes ids or a filter, not both.');
      return printIds(run, await changeIds(run.db, run.positionals, str(run.values, 'queue'), BY_ID.remove), 'removed');
    }
    const queue = run.db.queue(requiredQueue(run, 'jobs remove'));
    const states = filterStates('jobs remove', run.values) as RemoveJobsState[];
    const n = await queue.removeJobs({ states, ...filterOf(run.values) });
    run.print({ queue: queue.name, removed: n }, () => `Removed ${n} job(s) of queue "${queue.name}".`);
    return EXIT.ok;
  },
};

const cancelCommand: Command = {
  name: 'jobs cancel',
  summary: 'cancel live jobs by id (a running one is told to stop)',
  usage:
    'jobs cancel <id...> [--queue <name>] --yes | jobs cancel --queue <name> --state <state>[,...] [--name <job name>] --yes',
  details: [
    'queue.cancel(id) for each: a waiting or delayed job ends cancelled at once; a running one has its',
    'handler\'s signal fired and ends cancelled unless it completes anyway ("cancelling").',
    'Exit code 1 when an id given was not live. By filter: queue.cancelJobs({ states, name }) over waiting,',
    'delayed, waiting-children or active jobs, in batches.',
  ].join('\n'),
  flags: {
    ...QUEUE,
    state: { type: 'string', multiple: true, arg: '<state>', help: 'filter: the live states to cancel' },
    ...NAME,
  },
  positionals: { min: 0, max: 1000, name: 'job ids' },
  destructive: true,
  confirmText: ({ positionals, values }) =>
    positionals.length === 0
      ? `Cancel the ${filterStates('jobs cancel', values).join(', ')} jobs of queue "${required('jobs cancel', values, 'queue')}"${values.name ? ` named ${String(values.name)}` : ''}?`
      : `Cancel ${positionals.length} job(s) (${positionals.slice(0, 5).join(', ')}${positionals.length > 5 ? ', ...' : ''})?`,
  async run(run) {
    if (run.positionals.length) {
      if (filterGiven(run.values, ['state', 'name'])) throw new UsageError('`jobs cancel` takes ids or a filter, not both.');
      return printIds(run, await changeIds(run.db, run.positionals, str(run.values, 'queue'), BY_ID.cancel), 'cancelled');
    }
    const queue = run.db.queue(requiredQueue(run, 'jobs cancel'));
    const states = filterStates('jobs cancel', run.values) as CancelJobsState[];
    const name = str(run.values, 'name');
    const n = await queue.cancelJobs({ states, ...(name !== undefined ? { name } : {}) });
    run.print({ queue: queue.name, cancelled: n }, () => `Cancelled ${n} job(s) of queue "${queue.name}".`);
    return EXIT.ok;
  },
};

const promoteCommand: Command = {
  name: 'jobs promote',
  summary: 'make delayed jobs due now: by id, or every delayed job of a queue (of one name)',
  usage: 'jobs promote <id...> [--queue <name>] | jobs promote --queue <name> [--name <job name>]',
  details:
    'By id: queue.promote(id); by filter: queue.promoteJobs({ name }), in batches of 1,000. Exit code 1 when an id given was not delayed.',
  flags: { ...QUEUE, ...NAME },
  positionals: { min: 0, max: 1000, name: 'job ids' },
  async run(run) {
    const { values, positionals, db } = run;
    if (positionals.length) {
      if (filterGiven(values, ['name'])) throw new UsageError('`jobs promote` takes ids or --name, not both.');
      return printIds(run, await changeIds(db, positionals, str(values, 'queue'), BY_ID.promote), 'promoted');
    }
    const queue = db.queue(requiredQueue(run, 'jobs promote'));
    const name = str(values, 'name');
    const n = await queue.promoteJobs(name !== undefined ? { name } : {});
    run.print({ queue: queue.name, promoted: n }, () => `${n} delayed job(s) of queue "${queue.name}" due now.`);
    return EXIT.ok;
  },
};

function requiredQueue({ values }: CommandRun, command: string): string {
  const q = str(values, 'queue');
  if (q === undefined)
    throw new UsageError(`\`${command}\` needs job ids, or --queue and a filter. Run nestjs-pg-queue ${command} --help.`);
  return q;
}

export const JOBS_CHANGE_COMMANDS: readonly Command[] = [retryCommand, removeCommand, cancelCommand, promoteCommand];
