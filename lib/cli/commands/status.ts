import { listenSql } from '../../db/listen';
import { str } from '../args';
import { EXIT, type Command } from '../command';
import { ago, humanDuration, table } from '../output';

const statusCommand: Command = {
  name: 'status',
  summary: 'queues (counts, paused, oldest waiting), live nodes and listeners',
  usage: 'status [--queue <name>] [--json]',
  details: [
    'Per queue: waiting (due now), delayed, active, stalled (lease expired), waiting-children, failed and',
    'cancelled (history kept), paused, and how long the oldest due job has waited. Completed jobs are',
    'not counted here (a scan of the history): `jobs list --state completed` pages them.',
    'Nodes: worker processes seen within 3 of their heartbeats. Listeners: sessions idle in',
    "LISTEN on this schema's channel, as far as this role may see pg_stat_activity.",
  ].join('\n'),
  flags: { queue: { type: 'string', arg: '<name>', help: 'only this queue' } },
  async run({ values, db, print }) {
    const one = str(values, 'queue');
    if (one !== undefined) db.queue(one); // the name is checked as the module checks it
    const [queues, nodes, listeners] = await Promise.all([
      db.dashboard.counts([], one ?? null),
      db.dashboard.nodes(),
      db.doctor.listeners(listenSql(db.store.channel)),
    ]);
    const doc = { schema: db.schema, version: db.version, queues, nodes, listeners };
    print(doc, () => {
      const now = Date.now();
      const q = queues.length
        ? table(
            [
              'QUEUE',
              'PAUSED',
              'WAITING',
              'DELAYED',
              'ACTIVE',
              'STALLED',
              'CHILDREN',
              'SLEEPING',
              'SIGNAL',
              'FAILED',
              'CANCELLED',
              'OLDEST WAITING',
            ],
            queues.map((r) => [
              r.name,
              r.paused ? 'paused' : '-',
              String(r.waiting),
              String(r.delayed),
              String(r.active),
              String(r.stalled),
              String(r.waitingChildren),
              String(r.sleeping),
              String(r.waitingSignal),
              String(r.failed),
              String(r.cancelled),
              humanDuration(r.oldestWaitingAgeMs),
            ]),
            [2, 3, 4, 5, 6, 7, 8, 9, 10],
          )
        : one !== undefined
          ? `No jobs and no settings for queue "${one}".`
          : 'No queues yet.';
      const n = nodes.length
        ? table(
            ['NODE', 'HOST', 'PID', 'RUNNING', 'LAST HEARTBEAT', 'STARTED', 'QUEUES'],
            nodes.map((x) => [
              x.id,
              x.host,
              String(x.pid),
              String(x.running),
              ago(x.lastSeenAt, now),
              ago(x.startedAt, now),
              x.queues.map((c) => `${c.name}(${c.concurrency})`).join(' '),
            ]),
            [2, 3],
          )
        : 'No live nodes (no worker process heartbeats into this schema).';
      return [
        `Schema "${db.schema}" (version ${db.version})`,
        '',
        q,
        '',
        `Nodes: ${nodes.length} live`,
        n,
        '',
        `Listeners: ${listeners} session(s) LISTEN on "${db.store.channel}" (as far as this role sees pg_stat_activity)`,
      ].join('\n');
    });
    return EXIT.ok;
  },
};

export const STATUS_COMMANDS: readonly Command[] = [statusCommand];
