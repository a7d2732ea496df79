import { required, QUEUE } from '../args';
import { EXIT, type Command } from '../command';

const pauseCommand: Command = {
  name: 'pause',
  summary: 'pause a queue on every node (queue.pause)',
  usage: 'pause --queue <name>',
  details: 'No worker claims its jobs until resume; running jobs finish. Stored in the database: holds across restarts.',
  flags: { ...QUEUE },
  async run({ values, db, print }) {
    const queue = db.queue(required('pause', values, 'queue'));
    await queue.pause();
    print({ queue: queue.name, paused: true }, () => `Queue "${queue.name}" paused.`);
    return EXIT.ok;
  },
};

const resumeCommand: Command = {
  name: 'resume',
  summary: 'resume a paused queue; every node is woken (queue.resume)',
  usage: 'resume --queue <name>',
  flags: { ...QUEUE },
  async run({ values, db, print }) {
    const queue = db.queue(required('resume', values, 'queue'));
    await queue.resume();
    print({ queue: queue.name, paused: false }, () => `Queue "${queue.name}" resumed.`);
    return EXIT.ok;
  },
};

export const QUEUE_COMMANDS: readonly Command[] = [pauseCommand, resumeCommand];
