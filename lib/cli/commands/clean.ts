import type { CleanState } from '../../core/clean';
import { parseCount, parseDuration, required, str, QUEUE } from '../args';
import { EXIT, type Command } from '../command';
import { humanDuration } from '../output';

const cleanCommand: Command = {
  name: 'clean',
  summary: 'remove finished jobs of one state older than a duration (queue.clean)',
  usage: 'clean --queue <name> --state completed|failed|cancelled --older-than <duration> [--limit <n>] --yes',
  details: [
    'Removes from history the jobs of that state that finished more than --older-than ago (500ms, 90s,',
    '15m, 12h, 1d, 2w), at most --limit of them; a thousand per statement, each its own short',
    'transaction, safe while workers run. BullMQ: queue.clean(grace, limit, type).',
  ].join('\n'),
  flags: {
    ...QUEUE,
    state: { type: 'string', arg: '<state>', help: 'completed, failed or cancelled (required)', required: true },
    'older-than': {
      type: 'string',
      arg: '<duration>',
      help: 'finished longer ago than this (required): 1d, 12h, 30m',
      required: true,
    },
    limit: { type: 'string', arg: '<n>', help: 'remove at most this many (default: all that match)' },
  },
  destructive: true,
  confirmText: ({ values }) =>
    `Remove the ${required('clean', values, 'state')} jobs of queue "${required('clean', values, 'queue')}" finished more than ` +
    `${required('clean', values, 'older-than')} ago${values.limit ? ` (at most ${String(values.limit)})` : ''}?`,
  async run({ values, db, print }) {
    const queue = db.queue(required('clean', values, 'queue'));
    const state = required('clean', values, 'state') as CleanState;
    const olderThanMs = parseDuration('older-than', required('clean', values, 'older-than'));
    const limit = str(values, 'limit');
    const removed = await queue.clean({
      state,
      olderThanMs,
      ...(limit !== undefined ? { limit: parseCount('limit', limit) } : {}),
    });
    print(
      { queue: queue.name, state, olderThanMs, removed },
      () => `Removed ${removed} ${state} job(s) of queue "${queue.name}" finished more than ${humanDuration(olderThanMs)} ago.`,
    );
    return EXIT.ok;
  },
};

const drainCommand: Command = {
  name: 'drain',
  summary: 'remove every waiting and delayed job of a queue (queue.drain)',
  usage: 'drain --queue <name> --yes',
  details: 'Running jobs, jobs waiting on their children and the history are left alone. BullMQ: queue.drain().',
  flags: { ...QUEUE },
  destructive: true,
  confirmText: ({ values }) => `Remove every waiting and delayed job of queue "${required('drain', values, 'queue')}"?`,
  async run({ values, db, print }) {
    const queue = db.queue(required('drain', values, 'queue'));
    const removed = await queue.drain();
    print({ queue: queue.name, removed }, () => `Removed ${removed} waiting or delayed job(s) of queue "${queue.name}".`);
    return EXIT.ok;
  },
};

const obliterateCommand: Command = {
  name: 'obliterate',
  summary: 'remove everything of a queue, live and history (queue.obliterate)',
  usage: 'obliterate --queue <name> [--force] --yes',
  details: [
    'Refused (exit code 1) while jobs of the queue run, unless --force: pause the queue first',
    '(its workers then claim nothing). A rerun finishes an interrupted one. BullMQ: queue.obliterate({ force }).',
  ].join('\n'),
  flags: { ...QUEUE, force: { type: 'boolean', help: 'remove running jobs too' } },
  destructive: true,
  confirmText: ({ values }) =>
    `Remove every job of queue "${required('obliterate', values, 'queue')}", live and finished${values.force ? ', running ones included' : ''}?`,
  async run({ values, db, print }) {
    const queue = db.queue(required('obliterate', values, 'queue'));
    const removed = await queue.obliterate({ force: values.force === true });
    print({ queue: queue.name, removed }, () => `Removed ${removed} job(s) of queue "${queue.name}".`);
    return EXIT.ok;
  },
};

export const CLEAN_COMMANDS: readonly Command[] = [cleanCommand, drainCommand, obliterateCommand];
