import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { Process, Processor, QueueService, type Job } from '../../lib';
import { bootApp, runtimeOf } from '../support/app';
import { createTestDatabase, waitFor, type TestDatabase } from '../support/database';
import { TcpProxy } from '../support/tcp-proxy';

const started = new Set<string>();

@Processor('ping')
class PingProcessor {
  @Process()
  handle(job: Job<{ token: string }>) {
    started.add(job.payload.token);
  }
}

async function listenerPids(url: string): Promise<number[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = 'nestjs-pg-queue:listen' AND datname = current_database()`,
    );
    return rows.map((r) => r.pid);
  } finally {
    await c.end();
  }
}

/**
 * The apps here poll every 60 s (after the one poll at start), so a job that starts within this
 * deadline was woken by its notification (or its own timer). How fast is `npm run bench`'s figure.
 */
const WOKEN_WITHIN_MS = 15_000;

/** Enqueues one job and waits for it to start before the next poll could have found it. */
async function startsWithoutPoll(app: INestApplicationContext): Promise<void> {
  const token = randomUUID();
  await app.get(QueueService).add('ping', 'p', { token });
  await waitFor(() => started.has(token), {
    timeoutMs: WOKEN_WITHIN_MS,
    message: `job ${token} to start (by its NOTIFY: the poll is 60 s)`,
  });
}

describe('LISTEN/NOTIFY wake-ups, polling as the floor', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;

  beforeAll(async () => {
    db = await createTestDatabase();
    // A 60 s poll: any start well under that came from a notification.
    app = await bootApp({
      options: { connection: db.url, pollIntervalMs: 60_000 },
      queues: [{ name: 'ping' }],
      providers: [PingProcessor],
    });
    await app.init();
    await waitFor(() => runtimeOf(app).supervisor.listenerState?.connected === true, { message: 'listener to connect' });
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a committed job starts at once although the poll interval is 60 s', async () => {
    for (let i = 0; i < 5; i++) await startsWithoutPoll(app);
  });

  it('after pg_terminate_backend on the listener it reconnects, catches up, and wake-ups are fast again', async () => {
    const [before] = await listenerPids(db.url);
    expect(before).toBeDefined();
    const admin = new Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('SELECT pg_terminate_backend($1)', [before]);
    // Enqueued while the listener may be down: the catch-up poll after reconnecting finds it.
    const missed = randomUUID();
    await app.get(QueueService).add('ping', 'p', { token: missed });
    await admin.end();
    await waitFor(
      async () => {
        const pids = await listenerPids(db.url);
        return pids.length === 1 && pids[0] !== before && runtimeOf(app).supervisor.listenerState?.connected === true;
      },
      { timeoutMs: 15_000, message: 'listener to reconnect with a new backend' },
    );
    await waitFor(() => started.has(missed), { timeoutMs: 15_000, message: 'job enqueued during the outage to run' });
    await startsWithoutPoll(app);
  });

  it('with the listener unreachable, jobs still flow by polling', async () => {
    const polled = await bootApp({
      // Port 1 refuses connections: the listener retries forever in the background.
      options: {
        connection: db.url,
        listenConnection: 'postgres://postgres@127.0.0.1:1/none',
        pollIntervalMs: 200,
        schema: 'pgqueue_poll',
      },
      queues: [{ name: 'ping' }],
      providers: [PingProcessor],
    });
    await polled.init();
    try {
      const ids = Array.from({ length: 20 }, () => randomUUID());
      await polled.get(QueueService).addBulk(
        'ping',
        ids.map((token) => ({ name: 'p', payload: { token } })),
      );
      await waitFor(() => ids.every((id) => started.has(id)), { timeoutMs: 10_000, message: 'polled jobs to run' });
      expect(runtimeOf(polled).supervisor.listenerState?.connected).toBe(false);
    } finally {
      await polled.close();
    }
  });

  it('over an outage the listener reconnects on the capped, doubling schedule, and starts over once back', async () => {
    const proxy = await TcpProxy.forUrl(db.url);
    const through = await bootApp({
      options: { connection: db.url, listenConnection: proxy.urlThrough(db.url), pollIntervalMs: 200, schema: 'pgqueue_backoff' },
      queues: [{ name: 'ping' }],
      providers: [PingProcessor],
    });
    await through.init();
    const state = () => runtimeOf(through).supervisor.listenerState;
    // Every reconnect the listener schedules, as (attempt, delay); polled often, so few are missed
    // (a missed one does not matter: each one seen is checked against its own attempt number).
    const seen = new Map<number, number>();
    const record = () => {
      const r = state()?.scheduledReconnect;
      if (r) seen.set(r.attempt, r.delayMs);
    };
    try {
      await waitFor(() => state()?.connected === true, { message: 'listener to connect through the proxy' });
      await proxy.stop();
      await waitFor(() => (record(), Math.max(0, ...seen.keys()) >= 5), {
        timeoutMs: 20_000,
        intervalMs: 5,
        message: () => `five reconnects to be scheduled; seen ${JSON.stringify([...seen])}`,
      });
      for (const [attempt, delayMs] of seen) {
        const ceiling = Math.min(5000, 100 * 2 ** (attempt - 1));
        expect({ attempt, delayMs: Math.min(Math.max(delayMs, ceiling / 2), ceiling) }).toEqual({ attempt, delayMs });
      }
      await proxy.start();
      await waitFor(() => state()?.connected === true && state()?.scheduledReconnect === null, {
        timeoutMs: 20_000,
        message: 'listener to reconnect once the proxy is back',
      });
      // A new drop starts from the first delay again, not from where the last outage left off.
      seen.clear();
      await proxy.stop();
      await waitFor(() => (record(), seen.size > 0), {
        timeoutMs: 10_000,
        intervalMs: 5,
        message: 'a reconnect to be scheduled',
      });
      expect(Math.min(...seen.keys())).toBeLessThanOrEqual(2);
    } finally {
      await through.close();
      await proxy.stop();
    }
  });

  it('poll-only mode (listen: false) opens no LISTEN connection and still runs jobs', async () => {
    const polled = await bootApp({
      options: { connection: db.url, listen: false, pollIntervalMs: 200, schema: 'pgqueue_nolisten' },
      queues: [{ name: 'ping' }],
      providers: [PingProcessor],
    });
    await polled.init();
    try {
      expect(runtimeOf(polled).supervisor.listenerState).toBeNull();
      const token = randomUUID();
      await polled.get(QueueService).add('ping', 'p', { token });
      await waitFor(() => started.has(token), { timeoutMs: 10_000, message: 'job to run by polling' });
    } finally {
      await polled.close();
    }
  });

  it('a delayed job is woken by a timer at its run time, not by the 60 s poll', async () => {
    const token = randomUUID();
    const job = await app.get(QueueService).add('ping', 'p', { token }, { delayMs: 700 });
    expect(job.state).toBe('delayed');
    await waitFor(() => started.has(token), {
      timeoutMs: WOKEN_WITHIN_MS,
      message: 'delayed job to start (by its timer: the poll is 60 s)',
    });
    await waitFor(async () => (await app.get(QueueService).getJob(job.id))?.state === 'completed', {
      message: 'delayed job to complete',
    });
    // Not before it was due, by the database's clock (the one that stamped both).
    const done = (await app.get(QueueService).getJob(job.id))!;
    expect(done.startedAt!.getTime()).toBeGreaterThanOrEqual(done.runAt.getTime());
  });
});
