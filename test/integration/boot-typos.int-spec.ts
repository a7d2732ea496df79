import 'reflect-metadata';
import { Module, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  OnQueueEvent,
  PgQueueConfigError,
  PgQueueModule,
  Process,
  Processor,
  QueueService,
  type PgQueueModuleOptions,
  type RegisterQueueOptions,
} from '../../lib';
import { resolveSchedule } from '../../lib/core/cron-schedule';
import { JobStore } from '../../lib/db/job-store';
import { JobSchedulerTicker } from '../../lib/worker/job-scheduler-ticker';
import { pooledOptions } from '../support/pgbouncer';
import { useTestDatabase, waitFor } from '../support/database';

// Mistakes that used to pass without a word: a listener on a queue that does not exist, a queue
// or a schedule nothing in the app runs, a shutdown that logged nothing; and a recurring job's
// ticks across a daylight-saving change, as the database stores them.

class CapturingLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  onLine?: (message: string) => void;
  private add(level: string, message: unknown) {
    this.lines.push({ level, message: String(message) });
    this.onLine?.(String(message));
  }
  log(m: unknown) {
    this.add('log', m);
  }
  warn(m: unknown) {
    this.add('warn', m);
  }
  error(m: unknown) {
    this.add('error', m);
  }
  debug(m: unknown) {
    this.add('debug', m);
  }
  verbose(m: unknown) {
    this.add('verbose', m);
  }
  said(level: string, re: RegExp) {
    return this.lines.some((l) => l.level === level && re.test(l.message));
  }
}

/** Boots like test/support/app.ts, but with a logger that sees the boot itself. */
function boot(options: PgQueueModuleOptions, queues: RegisterQueueOptions[], providers: unknown[], logger: LoggerService) {
  @Module({
    imports: [PgQueueModule.forRoot(pooledOptions(options)), PgQueueModule.registerQueue(...queues)],
    providers: providers as [],
  })
  class TypoAppModule {}
  return NestFactory.createApplicationContext(TypoAppModule, { logger, abortOnError: false });
}

const t = useTestDatabase();

describe('typos refused or warned about at boot', () => {
  it("refuses @OnQueueEvent('failed', { queue }) naming a queue that is not registered", async () => {
    class Alerts {
      @OnQueueEvent('failed', { queue: 'emial' })
      onFailed() {
        return undefined;
      }
    }
    const err = await boot({ connection: t.db.url, workers: false }, [{ name: 'email' }], [Alerts], new CapturingLogger()).catch(
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(PgQueueConfigError);
    expect((err as Error).message).toMatch(
      /@OnQueueEvent\('failed', \{ queue \}\) on Alerts\.onFailed: queue "emial" is not registered in this app.*Registered queues: "email"/,
    );
  });

  it('warns, naming them, about a queue no @Processor runs and a schedule no @Process handles', async () => {
    @Processor('reports')
    class Reports {
      @Process('weekly')
      weekly() {
        return undefined;
      }
    }
    const logs = new CapturingLogger();
    const app = await boot(
      { connection: t.db.url, pollIntervalMs: 1000 },
      [{ name: 'reports', repeat: [{ name: 'nightly', cron: '0 3 * * *', tz: 'Europe/Berlin' }] }, { name: 'orphan' }],
      [Reports],
      logs,
    );
    await app.close();
    expect(logs.said('warn', /Queue\(s\) "orphan" registered with workers on, but no @Processor of this app handles them/)).toBe(
      true,
    );
    expect(logs.said('warn', /Recurring job "nightly" of queue "reports" \(0 3 \* \* \*\) has no @Process\('nightly'\)/)).toBe(
      true,
    );
    expect(logs.said('warn', /"reports" registered/)).toBe(false);
  });

  it('logs the drain at shutdown: the jobs running, how long it waited, that the workers stopped', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started = false;
    @Processor('drain')
    class Slow {
      @Process('slow')
      async slow() {
        started = true;
        await released;
      }
    }
    const logs = new CapturingLogger();
    const app = await boot({ connection: t.db.url, pollIntervalMs: 100 }, [{ name: 'drain' }], [Slow], logs);
    await app.get(QueueService).add('drain', 'slow', {});
    await waitFor(() => started, { timeoutMs: 10_000, message: 'the job to start' });
    // The job finishes once shutdown said it waits for it.
    logs.onLine = (m) => {
      if (m.startsWith('Stopping workers')) release();
    };
    await app.close();
    expect(logs.said('log', /^Stopping workers: 1 job\(s\) running, waiting up to \d+ ms \(shutdownTimeoutMs\)/)).toBe(true);
    expect(logs.said('log', /^Workers stopped after \d+ ms \(waited \d+ ms for running jobs: every job finished\)/)).toBe(true);
    const done = await t.pool.query(
      `SELECT count(*)::int AS n FROM pgqueue.job_history WHERE queue = 'drain' AND state = 'completed'`,
    );
    expect(done.rows[0].n).toBe(1);
  });
});

describe('recurring jobs across daylight-saving changes, as stored', () => {
  // The schema, as a boot migrates it.
  beforeAll(async () => (await boot({ connection: t.db.url, workers: false }, [], [], new CapturingLogger())).close());

  /**
   * A node that catches up every 5 minutes over [from, to) (as the maintenance pass does, with
   * the default one-hour window): the jobs of `queue` stored, as their run_at.
   */
  async function catchUpAcross(queue: string, lastTick: string, from: string, to: string): Promise<string[]> {
    const store = new JobStore(t.pool, {
      schema: 'pgqueue',
      retention: { completedMs: 86_400_000, cancelledMs: 86_400_000, failedMs: null },
      asyncCommit: false,
      preparedStatements: false,
    });
    const schedule = resolveSchedule(queue, { name: 'nightly', cron: '30 2 * * *', tz: 'Europe/Berlin' }, 'test');
    const errors: Error[] = [];
    const quiet = { log: () => undefined, warn: () => undefined, error: () => undefined };
    const ticker = new JobSchedulerTicker(store.schedulers, 3_600_000, 1000, quiet, (e) => errors.push(e));
    // As a boot stores a schedule of migration 6's cron_schedules: its next tick follows the last one.
    await t.pool.query(
      `INSERT INTO pgqueue.job_schedulers (queue, id, pattern, tz, job_name, next_run_at, source) VALUES ($1, 'nightly', $2, $3, 'nightly', $4, 'code')`,
      [queue, schedule.cron, schedule.tz, schedule.next(new Date(lastTick))],
    );
    const stored = async () =>
      (await t.pool.query<{ run_at: Date }>(`SELECT run_at FROM pgqueue.jobs WHERE queue = $1 ORDER BY run_at`, [queue])).rows;
    for (let now = Date.parse(from); now < Date.parse(to); now += 5 * 60_000) {
      await ticker.runOnce(new Date(now));
      // Each due tick is enqueued by the first pass after it, not an hour-change later.
      for (const r of await stored()) expect(now - r.run_at.getTime()).toBeLessThan(5 * 60_000 + 1);
      if ((await stored()).length) break;
    }
    expect(errors).toEqual([]);
    // The whole day again (another node, a restart): each tick is enqueued once.
    for (let now = Date.parse(from); now < Date.parse(to); now += 5 * 60_000) await ticker.runOnce(new Date(now));
    return (await stored()).map((r) => r.run_at.toISOString());
  }

  it('a 02:30 Europe/Berlin job runs once on the spring-forward day (at 03:30 CEST)', async () => {
    const runs = await catchUpAcross('spring', '2026-03-28T01:30:00Z', '2026-03-28T22:00:00Z', '2026-03-29T06:00:00Z');
    expect(runs).toEqual(['2026-03-29T01:30:00.000Z']);
  });

  it('a 02:30 Europe/Berlin job runs once on the fall-back day (02:30 comes twice; the CET one)', async () => {
    const runs = await catchUpAcross('fall', '2026-10-24T00:30:00Z', '2026-10-24T22:00:00Z', '2026-10-25T06:00:00Z');
    expect(runs).toEqual(['2026-10-25T01:30:00.000Z']);
  });
});
