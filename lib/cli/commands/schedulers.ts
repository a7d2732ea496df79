import type { JobScheduler } from '../../core/job-scheduler';
import { required, QUEUE } from '../args';
import { EXIT, type Command, type CommandRun } from '../command';
import { ago, humanDuration, table } from '../output';

const ID = { min: 1, max: 1, name: 'scheduler id' } as const;

/** When a scheduler ticks, in one cell. */
function timing(s: JobScheduler): string {
  if (s.pattern !== null) return s.tz === 'UTC' ? s.pattern : `${s.pattern} (${s.tz})`;
  return `every ${humanDuration(s.every)}`;
}

const listCommand: Command = {
  name: 'schedulers list',
  summary: "a queue's job schedulers by next tick (queue.getJobSchedulers)",
  usage: 'schedulers list --queue <name> [--json]',
  details: 'Code-declared ones (source code, id = the job name) and those added at run time, soonest next tick first.',
  flags: { ...QUEUE },
  async run({ values, db, print }) {
    const queue = db.queue(required('schedulers list', values, 'queue'));
    const list = await queue.getJobSchedulers();
    print({ queue: queue.name, schedulers: list }, () => {
      const now = Date.now();
      const rows = list.map((s) => [
        s.id,
        s.name,
        timing(s),
        s.paused ? 'paused' : s.next ? ago(s.next, now) : '-',
        `${s.iterationCount}${s.limit !== null ? `/${s.limit}` : ''}`,
        s.source,
      ]);
      return rows.length
        ? table(['ID', 'JOB NAME', 'WHEN', 'NEXT', 'MADE', 'SOURCE'], rows, [4])
        : `Queue "${queue.name}" has no job schedulers.`;
    });
    return EXIT.ok;
  },
};

/** pause, resume and remove: one call on one scheduler; exit code 1 when the queue has none of that id. */
function oneScheduler(
  verb: 'pause' | 'resume' | 'remove',
  summary: string,
  call: (run: CommandRun, queue: ReturnType<CommandRun['db']['queue']>, id: string) => Promise<boolean>,
  done: string,
): Command {
  const name = `schedulers ${verb}`;
  return {
    name,
    summary,
    usage: `${name} <id> --queue <name>${verb === 'remove' ? ' --yes' : ''}`,
    flags: { ...QUEUE },
    positionals: ID,
    ...(verb === 'remove'
      ? {
          destructive: true,
          confirmText: ({ positionals, values }: CommandRun) =>
            `Remove job scheduler "${positionals[0]}" of queue "${required(name, values, 'queue')}"? Jobs it enqueued stay.`,
        }
      : {}),
    async run(run) {
      const queue = run.db.queue(required(name, run.values, 'queue'));
      const id = run.positionals[0];
      const found = await call(run, queue, id);
      run.print({ queue: queue.name, id, [done]: found }, () =>
        found ? `Job scheduler "${id}" of queue "${queue.name}" ${done}.` : `Queue "${queue.name}" has no job scheduler "${id}".`,
      );
      return found ? EXIT.ok : EXIT.failed;
    },
  };
}

export const SCHEDULER_COMMANDS: readonly Command[] = [
  listCommand,
  oneScheduler(
    'pause',
    'pause a job scheduler: no tick until resumed (queue.pauseJobScheduler)',
    (_r, q, id) => q.pauseJobScheduler(id),
    'paused',
  ),
  oneScheduler(
    'resume',
    'resume a paused job scheduler; ticks that passed meanwhile are skipped (queue.resumeJobScheduler)',
    (_r, q, id) => q.resumeJobScheduler(id),
    'resumed',
  ),
  oneScheduler(
    'remove',
    'remove a job scheduler; a code-declared one comes back at the next boot (queue.removeJobScheduler)',
    (_r, q, id) => q.removeJobScheduler(id),
    'removed',
  ),
];
