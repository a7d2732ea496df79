import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import {
  JobFinishedWithError,
  OnQueueEvent,
  PgQueueConfigError,
  Process,
  Processor,
  QueueService,
  UnrecoverableError,
  type ActiveJob,
  type Job,
  type JobAttemptError,
} from '../../lib';
import { eventsChannel } from '../../lib/db/events';
import type { ConfirmRow } from '../../lib/db/events';
import { EventsHub, type EventSink } from '../../lib/worker/queue-events-hub';
import type { ConfirmedEvent } from '../../lib/worker/event-confirm';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// The modes around the cross-process events: poll-only (no LISTEN: waits poll, subscriptions are
// refused), publishing off (no NOTIFY at all), a burst past the listener's backlog (lagged, never
// unbounded), and a flow parent awaited like any job. The events themselves: queue-events.int-spec.ts.

@Processor('m')
class ModesProcessor {
  @Process('ok')
  ok(job: ActiveJob<{ n: number }>) {
    return job.payload.n + 1;
  }

  @Process('boom')
  boom() {
    throw new UnrecoverableError('child broke');
  }

  @Process('parent')
  parent() {
    return 'parent done';
  }
}

/** What @OnQueueEvent heard of flows in the LISTEN app: `released:id` and `failed:id:errorName`. */
const flowHeard: string[] = [];

@Injectable()
class FlowListener {
  @OnQueueEvent('released', { queue: 'm' })
  released(job: Job) {
    flowHeard.push(`released:${job.id}`);
  }

  @OnQueueEvent('failed', { queue: 'm' })
  failed(job: Job, error: JobAttemptError) {
    flowHeard.push(`failed:${job.id}:${error.name}`);
  }
}

const silent = { log: () => undefined, warn: () => undefined, error: () => undefined };

describe('cross-process events: modes', () => {
  const t = useTestDatabase();
  const WAIT = { timeoutMs: 20_000 };

  describe('poll-only (listen: false)', () => {
    let app: INestApplicationContext;
    beforeAll(async () => {
      app = await bootApp({
        options: { connection: t.db.url, listen: false },
        queues: [{ name: 'm' }],
        providers: [ModesProcessor],
      });
    });
    afterAll(() => app?.close());

    it('waitForJob polls the row and answers; queue.events() is refused with what to change', async () => {
      const queues = app.get(QueueService);
      const job = await queues.add('m', 'ok', { n: 41 });
      await expect(job.waitUntilFinished(WAIT)).resolves.toBe(42);
      const boom = await queues.add('m', 'boom', {});
      await expect(queues.waitForJob('m', boom.id, WAIT)).rejects.toBeInstanceOf(JobFinishedWithError);
      expect(() => queues.queueEvents('m')).toThrow(PgQueueConfigError);
      expect(() => queues.queueEvents('m')).toThrow(/poll-only \(listen: false\).*listenConnection/);
    });

    it('refuses at boot an @OnQueueEvent method in a poll-only app', async () => {
      @Injectable()
      class Deaf {
        @OnQueueEvent('completed')
        done() {}
      }
      await expect(
        bootApp({ options: { connection: t.db.url, listen: false, workers: false }, queues: [{ name: 'm' }], providers: [Deaf] }),
      ).rejects.toThrow(/need a LISTEN connection/);
    });
  });

  it('events: { publish: false } sends no NOTIFY (a control NOTIFY sent after the job ended arrives alone)', async () => {
    const app = await bootApp({
      options: { connection: t.db.url, events: { publish: false } },
      queues: [{ name: 'm' }],
      providers: [ModesProcessor],
    });
    const listener = new Client({ connectionString: t.db.url });
    try {
      await listener.connect();
      const got: string[] = [];
      listener.on('notification', (n) => got.push(n.payload ?? ''));
      await listener.query(`LISTEN ${eventsChannel('pgqueue')}`);
      const job = await app.get(QueueService).add('m', 'ok', { n: 1 });
      // Polled (no event comes): still answered.
      await expect(job.waitUntilFinished(WAIT)).resolves.toBe(2);
      // Notifications arrive in commit order: the control, sent after the completion committed, comes after it.
      await t.pool.query(`SELECT pg_notify($1, 'control')`, [eventsChannel('pgqueue')]);
      await waitFor(() => got.includes('control'), { ...WAIT, message: 'the control notification' });
      expect(got).toEqual(['control']);
    } finally {
      await listener.end();
      await app.close();
    }
  });

  describe('with LISTEN', () => {
    let app: INestApplicationContext;
    beforeAll(async () => {
      app = await bootApp({
        options: { connection: t.db.url },
        queues: [{ name: 'm' }],
        providers: [ModesProcessor, FlowListener],
      });
    });
    afterAll(() => app?.close());

    it('publishes (a control: with publishing on, the same completion is heard on the channel)', async () => {
      const listener = new Client({ connectionString: t.db.url });
      try {
        await listener.connect();
        const got: string[] = [];
        listener.on('notification', (n) => got.push(n.payload ?? ''));
        await listener.query(`LISTEN ${eventsChannel('pgqueue')}`);
        const job = await app.get(QueueService).add('m', 'ok', { n: 1 });
        await waitFor(() => got.includes(`completed|m|${job.id}.1`), {
          ...WAIT,
          message: () => `the event; got ${got.join(' ')}`,
        });
      } finally {
        await listener.end();
      }
    });

    it('awaits a flow parent: its release and its failure by a child are heard as events (migration 0016)', async () => {
      const queues = app.get(QueueService);
      const events = queues.queueEvents('m');
      const released: string[] = [];
      const failed: string[] = [];
      events.on('released', (job) => released.push(job.id));
      events.on('failed', (job, error) => failed.push(`${job.id}:${error.name}`));
      try {
        await runtimeOf(app).connectionOf('m').events.ready(WAIT.timeoutMs);
        const ok = await queues.addFlow({
          queue: 'm',
          name: 'parent',
          payload: {},
          children: [{ queue: 'm', name: 'ok', payload: { n: 1 } }],
        });
        await expect(queues.waitForJob('m', ok.job.id, WAIT)).resolves.toBe('parent done');
        // The trigger published the release when the child completed (before it, nothing did).
        await waitFor(() => released.includes(ok.job.id), { ...WAIT, message: () => `the release; heard ${released.join(' ')}` });
        // A child's failure fails the parent inside the trigger, which publishes it as failed:
        // the wait settles from that event (before 0016, only its 5 s re-read found it).
        const failing = await queues.addFlow({
          queue: 'm',
          name: 'parent',
          payload: {},
          children: [{ queue: 'm', name: 'boom', payload: {} }],
        });
        const e = await queues.waitForJob('m', failing.job.id, WAIT).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(JobFinishedWithError);
        expect((e as JobFinishedWithError).state).toBe('failed');
        await waitFor(() => failed.includes(`${failing.job.id}:ChildFailedError`), {
          ...WAIT,
          message: () => `the parent's failure; heard ${failed.join(' ')}`,
        });
        expect(released).not.toContain(failing.job.id);

        // Forged releases: a plain job that completed, and the parent a child failed. Then a
        // control, a replay of the true release, sent after them: once it is heard, the forged
        // ones were read and fired nothing.
        const plain = await queues.add('m', 'ok', { n: 1 });
        await plain.waitUntilFinished(WAIT);
        const send = (p: string) => t.pool.query(`SELECT pg_notify($1, $2)`, [eventsChannel('pgqueue'), p]);
        await send(`released|m|${plain.id}.0,${plain.id}.1,${failing.job.id}.0`);
        const before = released.length;
        await send(`released|m|${ok.job.id}.0`);
        await waitFor(() => released.length > before, { ...WAIT, message: 'the replayed release (the control)' });
        expect(released.slice(before)).toEqual([ok.job.id]);
        expect(released).not.toContain(plain.id);
        expect(released).not.toContain(failing.job.id);
      } finally {
        await events.close();
      }
    });

    it('@OnQueueEvent hears a release, and a failure passed up two levels (each parent failed by its child)', async () => {
      const queues = app.get(QueueService);
      await runtimeOf(app).connectionOf('m').events.ready(WAIT.timeoutMs);
      const ok = await queues.addFlow({
        queue: 'm',
        name: 'parent',
        payload: {},
        children: [{ queue: 'm', name: 'ok', payload: { n: 2 } }],
      });
      await waitFor(() => flowHeard.includes(`released:${ok.job.id}`), {
        ...WAIT,
        message: () => `the release; heard ${flowHeard.join(' ')}`,
      });
      const tree = await queues.addFlow({
        queue: 'm',
        name: 'parent',
        payload: {},
        children: [{ queue: 'm', name: 'parent', payload: {}, children: [{ queue: 'm', name: 'boom', payload: {} }] }],
      });
      const middle = tree.children[0]!.job.id;
      const top = tree.job.id;
      await waitFor(
        () => flowHeard.includes(`failed:${middle}:ChildFailedError`) && flowHeard.includes(`failed:${top}:ChildFailedError`),
        {
          ...WAIT,
          message: () => `both parents' failures; heard ${flowHeard.join(' ')}`,
        },
      );
      expect(flowHeard).not.toContain(`released:${middle}`);
      expect(flowHeard).not.toContain(`released:${top}`);
    });

    it('an iterator read at once keeps up with a burst larger than its buffer (no lagged)', async () => {
      const queues = app.get(QueueService);
      const before = (await queues.getJobCounts('m', 'completed')).completed;
      const jobs = await queues.getQueue('m').addBulk(Array.from({ length: 3000 }, (_, n) => ({ name: 'ok', payload: { n } })));
      const ids = jobs.map((j) => j.id);
      await waitFor(async () => (await queues.getJobCounts('m', 'completed')).completed >= before + 3000, WAIT);
      const events = queues.queueEvents('m');
      const it = events.iterate({ bufferSize: 100 });
      let completed = 0;
      let lagged = 0;
      const reading = (async () => {
        for (let r = await it.next(); !r.done; r = await it.next()) {
          if (r.value.event === 'completed') completed++;
          else if (r.value.event === 'lagged') lagged += r.value.args[0].missed;
        }
      })();
      try {
        // The iterator subscribed the hub; once LISTEN is up, replay all 3,000 completions in one transaction.
        await runtimeOf(app).connectionOf('m').events.ready(WAIT.timeoutMs);
        await t.pool.query(`SELECT pg_notify($1, 'completed|m|' || id || '.1') FROM unnest($2::text[]) id`, [
          eventsChannel('pgqueue'),
          ids,
        ]);
        await waitFor(() => completed + lagged >= 3000, { ...WAIT, message: () => `${completed} completed, ${lagged} lagged` });
        expect(lagged).toBe(0);
        expect(completed).toBe(3000);
      } finally {
        await events.close();
        await reading;
      }
    });

    it('a burst past the backlog is dropped and reported as lagged, with the count and ids; nothing else is lost', async () => {
      const queues = app.get(QueueService);
      const before = (await queues.getJobCounts('m', 'completed')).completed;
      const jobs = await queues.getQueue('m').addBulk(Array.from({ length: 300 }, (_, n) => ({ name: 'ok', payload: { n } })));
      const ids = jobs.map((j) => j.id);
      await waitFor(async () => (await queues.getJobCounts('m', 'completed')).completed >= before + 300, WAIT);

      // A hub whose first read is held back, so the hints of the burst pile up behind it.
      const store = runtimeOf(app).connectionOf('m').store;
      let released = false;
      let open!: () => void;
      const held = new Promise<void>((r) => (open = r));
      const release = () => {
        released = true;
        open();
      };
      let reads = 0;
      const hub = new EventsHub({
        connection: { connectionString: t.db.url },
        channel: eventsChannel('pgqueue'),
        logger: silent,
        maxPending: 50,
        reads: {
          confirm: async (batch: readonly string[]): Promise<ConfirmRow[]> => {
            if (reads++ === 0) await held;
            return store.events.confirm(batch);
          },
        },
      });
      const delivered = new Set<string>();
      let missed = 0;
      const missedIds: string[] = [];
      let asked = 0;
      const sink: EventSink = {
        wants: (h) => {
          if (!released) asked++;
          return h.queue === 'm';
        },
        deliver: (e: ConfirmedEvent) => delivered.add(e.id),
        lagged: (count, lagIds) => {
          missed += count;
          missedIds.push(...lagIds);
        },
        connected: () => undefined,
        closed: () => undefined,
      };
      try {
        hub.add(sink);
        await hub.ready(WAIT.timeoutMs);
        // Replays of the 300 real completions, one notification each: the first alone, whose
        // read is held; then the other 299 as a burst behind it.
        const replay = (some: string[]) =>
          t.pool.query(`SELECT pg_notify($1, 'completed|m|' || id || '.1') FROM unnest($2::text[]) id`, [
            eventsChannel('pgqueue'),
            some,
          ]);
        await replay(ids.slice(0, 1));
        await waitFor(() => reads > 0, WAIT);
        await replay(ids.slice(1));
        // The hub asks the sink about each hint it receives: all 300 are in once it asked 300 times.
        await waitFor(() => asked >= 300, { ...WAIT, message: () => `the burst to arrive (${asked} hints so far)` });
        release();
        await waitFor(() => delivered.size + missed === 300, {
          ...WAIT,
          message: () => `every hint delivered or counted; ${delivered.size} delivered, ${missed} missed`,
        });
        // The first job's read and the 50 kept behind it were read; the other 249 were dropped, and said.
        expect(delivered.size).toBe(51);
        expect(missed).toBe(249);
        expect(missedIds.length).toBeGreaterThanOrEqual(100);
        expect(missedIds.every((id) => ids.includes(id) && !delivered.has(id))).toBe(true);
      } finally {
        release();
        await hub.stop();
      }
    });
  });
});
