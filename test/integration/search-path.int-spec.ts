import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Process, Processor, QueueService, type ActiveJob, type PgQueueModuleOptions } from '../../lib';
import { migrate } from '../../lib/db/migrator';
import { bootApp, runtimeOf } from '../support/app';
import { useTestDatabase, waitFor } from '../support/database';

// A schema on the runtime role's search_path that another role can create in (`public` on
// PostgreSQL 14 and older) must not take over the library's operators (issue 25, point 2).
// PostgreSQL looks in pg_catalog first for an operator of the very same argument types, but
// operators of other argument types are weighed on an equal footing wherever they are on the
// path: `'!cancel|' || id` (text || bigint, which pg_catalog serves only through the polymorphic
// text || anynonarray) picked a planted `||(text, bigint)`, and `$1 * interval '1 millisecond'`
// (an untyped parameter) a planted `*(text, interval)`. Here every arithmetic, comparison and
// concatenation operator is planted for every pair of the types the statements use, each one
// raising; the queue's life (add, bulk add, delayed, claim, complete, retry with backoff, fail,
// cancel, heartbeat, maintenance) must never call one.

const TYPES = ['text', 'bigint', 'integer', 'numeric', 'double precision', 'timestamptz', 'interval', 'jsonb', 'boolean'];
const COMPARISONS = ['=', '<>', '<', '<=', '>', '>='];
const ARITHMETIC = ['+', '-', '*', '/'];

/** What a planted operator returns: whatever lets the statement plan, so that it is called. */
function returns(op: string, a: string, b: string): string {
  if (COMPARISONS.includes(op)) return 'boolean';
  if (op === '||') return 'text';
  if (a === 'timestamptz' || b === 'timestamptz') return op === '-' && a === b ? 'interval' : 'timestamptz';
  if (a === 'interval' || b === 'interval') return 'interval';
  return a;
}

function plantSql(): string {
  const lines = ['CREATE SCHEMA evil;'];
  let n = 0;
  for (const op of ['||', ...COMPARISONS, ...ARITHMETIC]) {
    for (const a of TYPES) {
      for (const b of TYPES) {
        const fn = `evil.hit_${++n}`;
        lines.push(
          `CREATE FUNCTION ${fn}(a ${a}, b ${b}) RETURNS ${returns(op, a, b)} LANGUAGE plpgsql AS ` +
            `$$BEGIN RAISE EXCEPTION 'evil operator %(%, %) called', '${op}', '${a}', '${b}'; END$$;`,
          `CREATE OPERATOR evil.${op} (LEFTARG = ${a}, RIGHTARG = ${b}, FUNCTION = ${fn});`,
        );
      }
    }
  }
  return lines.join('\n');
}

const events: string[] = [];
const started = new Set<string>();

@Processor('sp')
class Handlers {
  @Process('ok')
  ok(job: ActiveJob<{ tag: string }>) {
    events.push(`ran:${job.payload.tag}`);
    return { tag: job.payload.tag };
  }

  @Process('flaky')
  flaky(job: ActiveJob<{ tag: string }>) {
    if (job.attempt === 1) throw new Error('first attempt fails');
    events.push(`ran:${job.payload.tag}`);
  }

  @Process('doomed')
  doomed() {
    throw new Error('always fails');
  }

  @Process('long')
  long(job: ActiveJob<{ tag: string }>) {
    started.add(job.payload.tag);
    return new Promise<void>((_, reject) => job.signal.addEventListener('abort', () => reject(new Error('aborted'))));
  }
}

describe('search_path hijack', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  const errors: string[] = [];

  const options = (): PgQueueModuleOptions => ({ connection: t.db.url, pollIntervalMs: 200 });
  const stateOf = async (tag: string) =>
    (
      await t.pool.query<{ state: string }>(
        `SELECT state FROM pgqueue.jobs WHERE payload->>'tag' = $1
         UNION ALL SELECT state FROM pgqueue.job_history WHERE payload->>'tag' = $1`,
        [tag],
      )
    ).rows[0]?.state;
  const ended = (tag: string, state: string) =>
    waitFor(async () => (await stateOf(tag)) === state, {
      message: async () => `${tag} to be ${state} (is ${await stateOf(tag)}; errors: ${errors.join(' | ')})`,
      timeoutMs: 10_000,
    });

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    await t.pool.query(plantSql());
    // Every new session of this database has the planted schema on its path (pg_catalog stays
    // first, implicitly, as for any role whose path does not name it).
    await t.pool.query(`ALTER DATABASE ${t.db.name} SET search_path = evil, public`);
    app = await bootApp({ options: options(), queues: [{ name: 'sp', concurrency: 4 }], providers: [Handlers] });
    runtimeOf(app).supervisor.on('error', (err) => errors.push(err.message));
    await waitFor(() => runtimeOf(app).supervisor.listenerState?.connected === true, { message: 'the listener' });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('the planted operators are on the path: a statement of the same shape calls one', async () => {
    const c = await t.pool.connect();
    try {
      await c.query('SET search_path = evil, public');
      await expect(c.query(`SELECT '!cancel|'::text || 5::bigint`)).rejects.toThrow(/evil operator \|\|\(text, bigint\)/);
    } finally {
      c.release();
    }
  });

  it('adds, claims, completes, retries, fails and cancels without calling any of them', async () => {
    const queue = app.get(QueueService).getQueue('sp');
    await queue.add('ok', { tag: 'single' });
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'ok', payload: { tag: `bulk${i}` } })));
    await queue.add('ok', { tag: 'delayed' }, { delayMs: 50 });
    await queue.add('flaky', { tag: 'flaky' }, { attempts: 2, backoff: { type: 'fixed', delayMs: 20 } });
    await queue.add('doomed', { tag: 'doomed' }, { attempts: 1 });
    const long = await queue.add('long', { tag: 'long' });
    for (const tag of ['single', 'bulk1', 'bulk2', 'bulk3', 'delayed', 'flaky']) await ended(tag, 'completed');
    await ended('doomed', 'failed');

    await waitFor(() => started.has('long'), { message: 'the long job to start' });
    expect(await queue.cancel(long.id)).toBe('cancelling');
    await ended('long', 'cancelled');

    const supervisor = runtimeOf(app).supervisor;
    await supervisor.heartbeat();
    await supervisor.maintain();
    expect(errors).toEqual([]);
  });
});
