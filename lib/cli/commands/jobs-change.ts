import type { Queue } from '../../producer/queue';
import { list, str, UsageError, type Flags, type FlagValues } from '../args';
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
      (await q.retry(id)) ? { changed: true, outcome: 'retried' } : { changed: false, outcome: 'not failed or cancelled' },
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

const retryCommand: Command = {
  name: 'jobs retry',
  summary: 'run failed (or cancelled) jobs again: by id, or every failed job of a queue (of one name)',
  usage: 'jobs retry <id...> [--queue <name>] | jobs retry --queue <name> --state failed [--name <job name>]',
  details: [
    'By id: queue.retry(id) for each (a failed or cancelled job goes back to waiting under its id).',
    'By filter: every failed job of the queue, of one job name with --name (a thousand per statement,',
    'each its own short transaction; the workers are woken).',
    'Exit code 1 when an id given was not retried.',
  ].join('\n'),
  flags: { ...QUEUE, state: { type: 'string', arg: '<state>', help: 'filter: failed' }, ...NAME },
  positionals: { min: 0, max: 1000, name: 'job ids' },
  async run(run) {
    const { values, positionals, db } = run;
    if (positionals.length) {
      if (filterGiven(values, ['state', 'name']))
        throw new UsageError('`jobs retry` takes ids or a filter (--state, --name), not both.');
      return printIds(run, await changeIds(db, positionals, str(values, 'queue'), BY_ID.retry), 'retried');
    }
    const queue = db.queue(requiredQueue(run, 'jobs retry'));
    const states = list(values, 'state');
    if (states.join() !== 'failed') {
      throw new UsageError(
        '`jobs retry --queue <name>` retries by filter `--state failed` (with --name, of one job name) in this version: give ids for cancelled or completed jobs.',
      );
    }
    const name = str(values, 'name');
    // One job name: the dashboard's retry of failed jobs (the same batches of 1,000, the workers woken).
    const n = name === undefined ? await queue.retryFailed() : await db.dashboard.retryFailed(queue.name, name);
    run.print({ queue: queue.name, retried: n }, () => `${n} failed job(s) of queue "${queue.name}" back to waiting.`);
    return EXIT.ok;
  },
};

const removeCommand: Command = {
  name: 'jobs remove',
  summary: 'delete waiting, delayed or finished jobs by id (never a running one)',
  usage: 'jobs remove <id...> [--queue <name>] --yes',
  details:
    'queue.remove(id) for each. A running job is not removed: cancel it first. Exit code 1 when an id given was not removed.',
  flags: { ...QUEUE },
  positionals: { min: 1, max: 1000, name: 'job ids' },
  destructive: true,
  confirmText: ({ positionals }) =>
    `Remove ${positionals.length} job(s) (${positionals.slice(0, 5).join(', ')}${positionals.length > 5 ? ', ...' : ''})?`,
  async run(run) {
    return printIds(run, await changeIds(run.db, run.positionals, str(run.values, 'queue'), BY_ID.remove), 'removed');
  },
};

const cancelCommand: Command = {
  name: 'jobs cancel',
  summary: 'cancel live jobs by id (a running one is told to stop)',
  usage: 'jobs cancel <id...> [--queue <name>] --yes',
  details: [
    'queue.cancel(id) for each: a waiting or delayed job ends cancelled at once; a running one has its',
    'handler\'s signal fired and ends cancelled unless it completes anyway ("cancelling").',
    'Exit code 1 when an id given was not live.',
  ].join('\n'),
  flags: { ...QUEUE },
  positionals: { min: 1, max: 1000, name: 'job ids' },
  destructive: true,
  confirmText: ({ positionals }) =>
    `Cancel ${positionals.length} job(s) (${positionals.slice(0, 5).join(', ')}${positionals.length > 5 ? ', ...' : ''})?`,
  async run(run) {
    return printIds(run, await changeIds(run.db, run.positionals, str(run.values, 'queue'), BY_ID.cancel), 'cancelled');
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
