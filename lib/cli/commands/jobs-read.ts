import type { Job, JobState } from '../../core/job';
import type { GetJobsOptions } from '../../core/find-options';
import type { JobLogsPage } from '../../core/job-logs';
import { list, parseCount, required, str } from '../args';
import { EXIT, type Command } from '../command';
import { ago, humanDuration, humanTime, table } from '../output';

/** One line of at most `max` characters. */
function oneLine(text: string, max: number): string {
  const s = text.replace(/\s+/g, ' ').trim();
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function lastError(job: Job): string {
  const e = job.errors[job.errors.length - 1];
  return e ? oneLine(`${e.name}: ${e.message}`, 60) : '-';
}

const listCommand: Command = {
  name: 'jobs list',
  summary: "a page of a queue's jobs by state and name (queue.getJobs)",
  usage: 'jobs list --queue <name> [--state <state>[,<state>...]] [--name <job name>] [--limit <n>] [--after <cursor>] [--json]',
  details: [
    'States: active, waiting, delayed, waiting-children, completed, failed, cancelled (default: all,',
    'in that order). Finished jobs are those the history keeps (retention). Waiting and delayed jobs',
    'come in claim order, the others newest first. The last line gives the --after of the next page.',
  ].join('\n'),
  flags: {
    queue: { type: 'string', arg: '<name>', help: 'the queue (required)', required: true },
    state: {
      type: 'string',
      multiple: true,
      arg: '<state>',
      help: 'only jobs in this state (repeat, or comma-separate, for several)',
    },
    name: { type: 'string', arg: '<job name>', help: 'only jobs of this job name' },
    limit: { type: 'string', arg: '<n>', help: 'jobs per page, 1 to 1000 (default 100)' },
    after: { type: 'string', arg: '<cursor>', help: "the page after this cursor (the previous page's next)" },
  },
  async run({ values, db, print }) {
    const queue = db.queue(required('jobs list', values, 'queue'));
    const states = list(values, 'state') as JobState[];
    const limit = str(values, 'limit');
    const opts: GetJobsOptions = {
      ...(states.length === 1 ? { state: states[0] } : states.length > 1 ? { states } : {}),
      ...(str(values, 'name') !== undefined ? { name: str(values, 'name') } : {}),
      ...(limit !== undefined ? { limit: parseCount('limit', limit) } : {}),
      ...(str(values, 'after') !== undefined ? { after: str(values, 'after') } : {}),
    };
    const page = await queue.getJobs(opts);
    print({ queue: queue.name, jobs: page.jobs, next: page.next ?? null }, () => {
      const now = Date.now();
      const rows = page.jobs.map((j) => [
        j.id,
        j.name,
        j.state,
        `${j.attempt}/${j.maxAttempts}`,
        String(j.priority),
        ago(j.createdAt, now),
        j.finishedAt ? ago(j.finishedAt, now) : ago(j.runAt, now),
        lastError(j),
      ]);
      return [
        rows.length
          ? table(['ID', 'NAME', 'STATE', 'ATTEMPT', 'PRIORITY', 'CREATED', 'RUN AT / FINISHED', 'LAST ERROR'], rows, [0, 4])
          : `No jobs of queue "${queue.name}" match.`,
        ...(page.next ? ['', `More: --after ${page.next}`] : []),
      ].join('\n');
    });
    return EXIT.ok;
  },
};

/** A job as `jobs show` prints it. */
function describeJob(j: Job): string {
  const now = Date.now();
  const json = (v: unknown) => JSON.stringify(v, null, 2).replace(/\n/g, '\n  ');
  const rows: [string, string][] = [
    ['queue', j.queue],
    ['name', j.name],
    ['state', j.state],
    ['attempt', `${j.attempt} of ${j.maxAttempts}`],
    ['priority', String(j.priority)],
    ['created', `${humanTime(j.createdAt)} (${ago(j.createdAt, now)})`],
    ['run at', `${humanTime(j.runAt)} (${ago(j.runAt, now)})`],
    ['started', j.startedAt ? `${humanTime(j.startedAt)} (${ago(j.startedAt, now)})` : '-'],
    ['finished', j.finishedAt ? `${humanTime(j.finishedAt)} (${ago(j.finishedAt, now)})` : '-'],
    ['timeout', j.timeoutMs === null ? '-' : humanDuration(j.timeoutMs)],
  ];
  if (j.flow) {
    rows.push([
      'flow',
      `parents ${j.flow.parentIds.join(', ') || '-'}; ${j.flow.pendingDependencies} of ${j.flow.dependencies} dependencies pending`,
    ]);
  }
  const out = [`Job ${j.id}`, ...rows.map(([k, v]) => `  ${k.padEnd(9)} ${v}`)];
  out.push('payload', `  ${json(j.payload)}`);
  if (j.progress !== null) out.push('progress', `  ${json(j.progress)}`);
  if (j.result !== null) out.push('result', `  ${json(j.result)}`);
  if (j.errors.length) {
    out.push(`errors (${j.errors.length})`);
    for (const e of j.errors)
      out.push(`  #${e.attempt} ${humanTime(e.at)} ${e.name}: ${e.message}${e.worker ? ` (node ${e.worker})` : ''}`);
  }
  return out.join('\n');
}

/** The job's log lines (job.log()) as `jobs show` prints them, numbered from 1. */
function describeLogs(page: JobLogsPage, offset: number): string[] {
  if (page.count === 0 && page.dropped === 0) return [];
  const shown = page.logs.length
    ? `lines ${offset + 1} to ${offset + page.logs.length} of ${page.count}`
    : `none of ${page.count} lines here`;
  return [
    `log (${shown}${page.dropped ? `; ${page.dropped} more dropped over the caps` : ''})`,
    ...page.logs.map((l, i) => `  ${String(offset + i + 1).padStart(4)}  ${l}`),
    ...(offset + page.logs.length < page.count ? [`  more: --log-offset ${offset + page.logs.length}`] : []),
  ];
}

const showCommand: Command = {
  name: 'jobs show',
  summary: 'one job, live or finished, with its payload, errors, result and log (getJob, getJobLogs)',
  usage: 'jobs show <id> [--queue <name>] [--json]',
  details: 'Exit code 1 when no job has that id (unknown, or pruned from history), or it is of another queue than --queue.',
  flags: {
    queue: { type: 'string', arg: '<name>', help: 'fail unless the job is of this queue' },
    'log-offset': { type: 'string', arg: '<n>', help: "skip this many of the job's log lines (default 0)" },
    'log-limit': { type: 'string', arg: '<n>', help: 'show at most this many log lines (default 100)' },
  },
  positionals: { min: 1, max: 1, name: 'job id' },
  async run({ values, positionals, db, print, io, json }) {
    const id = positionals[0];
    const queue = str(values, 'queue');
    const job = queue !== undefined ? await db.queue(queue).getJob(id) : await db.store.getJob(id);
    if (!job) {
      const message = `No job ${id}${queue !== undefined ? ` in queue "${queue}"` : ''} (unknown, or removed from history).`;
      if (json) print({ job: null }, () => '');
      io.err(`nestjs-pg-queue: ${message}`);
      return EXIT.failed;
    }
    const offset = str(values, 'log-offset');
    const limit = str(values, 'log-limit');
    const logs = await db.queue(job.queue).getJobLogs(job.id, {
      offset: offset === undefined ? 0 : parseCount('log-offset', offset, 0),
      limit: limit === undefined ? 100 : parseCount('log-limit', limit),
    });
    print({ job, logs }, () => [describeJob(job), ...describeLogs(logs, offset === undefined ? 0 : Number(offset))].join('\n'));
    return EXIT.ok;
  },
};

export const JOBS_READ_COMMANDS: readonly Command[] = [listCommand, showCommand];
