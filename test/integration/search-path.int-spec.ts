import 'reflect-metadata';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import { Process, Processor, QueueService, type ActiveJob, type PgQueueModuleOptions } from '../../lib';
import type { ListState } from '../../lib/core/dashboard-reads';
import { DashboardStore } from '../../lib/db/dashboard-store';
import { DoctorReads } from '../../lib/db/doctor';
import { poolExecutor } from '../../lib/db/executor';
import { migrate } from '../../lib/db/migrator';
import { bootApp, runtimeOf } from '../support/app';
import { testPool, useTestDatabase, waitFor } from '../support/database';

// A schema on the runtime role's search_path that another role can create in (`public` on
// PostgreSQL 14 and older) must not take over the library's functions or operators (issue 25,
// point 2). PostgreSQL searches pg_catalog first (implicitly, unless the path names it), but that
// only decides between functions or operators of *identical* argument types: candidates of other
// argument types are weighed on an equal footing wherever they are on the path, and the best
// match wins. So a planted `unnest(text[])` beats pg_catalog's `unnest(anyarray)` for
// `unnest($1::text[])` (an exact match beats a polymorphic one), `array_agg(bigint)` beats
// `array_agg(anynonarray)`, `jsonb_build_object(text, integer, ...)` beats
// `jsonb_build_object(VARIADIC "any")`, and `||(text, bigint)` beat `text || anynonarray` in the
// cancel statement. lib/db therefore writes every built-in function it calls with arguments as
// `pg_catalog.fn(...)` (only pg_catalog is then searched) and gives every operator operands of
// exactly the types pg_catalog serves (`relid = $1::regclass::oid`: a planted `=(oid, regclass)`
// beat pg_catalog's `=(oid, oid)` in the vacuum and history upkeep reads). Zero-argument calls
// (`now()`, `clock_timestamp()`, `pg_backend_pid()`, `count(*)`) stay as they are: the only
// planted function that can match them has no argument left to bind, which is the same
// signature as pg_catalog's, and pg_catalog comes first (a planted `now()`, `now(integer
// DEFAULT 0)` or `now(VARIADIC text[])` is not chosen either: checked below). SQL's own forms (EXTRACT(... FROM ...), AT TIME ZONE, COALESCE, GREATEST, CASE, CAST)
// are turned into pg_catalog calls or expression nodes by the parser and never searched.
//
// Planted here, in a schema first on the path, each one raising: every function name lib/db
// calls, with the argument types a call would match exactly or prefer (each single type and
// array type, the polymorphic ones, every pair for two arguments, and the exact signatures of
// the variadic and several-argument calls), and every arithmetic, comparison, concatenation and
// jsonb operator for every pair of the types the statements use, and every comparison of the
// catalogs' types (oid, regclass, smallint, xid, ...) with those. The queue's life (add, bulk,
// delayed, unique, flows, claim, limited claim, progress, complete, retry, fail, cancel, pause,
// remove, heartbeat, maintenance, getJobs, getJobCounts, getJobByKey, promote, promoteJobs,
// changePriority, changeDelay, updatePayload, clean, drain, obliterate, job logs, retryJobs, removeJobs,
// cancelJobs) and every dashboard read and
// action must call none of them.

const OP_TYPES = [
  'text',
  'varchar',
  'name',
  'bigint',
  'integer',
  'numeric',
  'double precision',
  'timestamptz',
  'timestamp',
  'interval',
  'jsonb',
  'boolean',
  'bigint[]',
  'integer[]',
  'text[]',
  'timestamptz[]',
];
const COMPARISONS = ['=', '<>', '<', '<=', '>', '>='];
/**
 * The system catalogs' own types, compared with each other and with OP_TYPES (a comparison
 * only: the statements do no arithmetic on them). `oid = $1::regclass` matched pg_catalog's
 * `=(oid, oid)` only after a cast, so a planted `=(oid, regclass)` was an exact match and won.
 */
const CATALOG_TYPES = ['oid', 'regclass', 'regnamespace', 'regrole', 'regtype', 'smallint', 'xid', '"char"'];
/**
 * The functions lib/db calls with no argument. A planted function of the same name and no
 * argument (a `public.now()`), or one whose arguments all have defaults or are variadic, has the
 * same empty argument list as pg_catalog's, and pg_catalog is searched first: none may be chosen.
 * The last test fails on a zero-argument call in lib/db that is not listed here.
 */
const ZERO_ARG = ['now', 'clock_timestamp', 'pg_backend_pid', 'current_database', 'pg_control_system'];
/**
 * SQL's own forms that look like calls: the parser turns them into expression nodes and looks
 * nothing up, so planted functions of these names are never called (written unqualified in lib/db).
 */
const KEYWORD_FORMS = ['coalesce', 'greatest', 'least', 'nullif'];
const ARITHMETIC = ['+', '-', '*', '/'];
const JSONB_OPS = ['->', '->>', '@>', '?'];

/**
 * Every built-in function lib/db calls with arguments, and how many it passes. The last test of
 * this file reads lib/db and fails on a call of a pg_catalog function that is not written
 * `pg_catalog.fn(...)`, so a new call cannot slip past unqualified (and should be added here).
 */
const CALLED: Record<string, readonly number[]> = {
  abs: [1],
  age: [1],
  array_agg: [1],
  array_cat: [2],
  array_fill: [2],
  array_position: [2],
  cardinality: [1],
  ceil: [1],
  current_setting: [1],
  date_part: [2],
  date_trunc: [2],
  generate_series: [3],
  json_agg: [1],
  json_build_array: [2, 3],
  json_build_object: [2, 6],
  jsonb_agg: [1],
  jsonb_array_elements: [1],
  jsonb_array_elements_text: [1],
  jsonb_array_length: [1],
  jsonb_build_array: [1],
  jsonb_build_object: [6, 8, 10, 22],
  jsonb_object_agg: [2],
  left: [2],
  length: [1],
  max: [1],
  md5: [1],
  min: [1],
  octet_length: [1],
  nextval: [1],
  pg_advisory_xact_lock: [1],
  pg_get_constraintdef: [1],
  pg_get_expr: [2],
  pg_get_serial_sequence: [2],
  pg_notify: [2],
  pg_relation_size: [1],
  pg_terminate_backend: [1],
  pg_try_advisory_xact_lock: [1],
  regexp_match: [2],
  set_config: [3],
  substr: [3],
  sum: [1],
  to_timestamp: [1],
  to_char: [2],
  to_regclass: [1],
  unnest: [1],
  string_agg: [2],
  bool_and: [1],
};

/** Argument types planted for one argument, and for every argument of a longer call alike. */
const ONE = [
  ...OP_TYPES,
  'json',
  'regclass',
  'oid',
  'anyelement',
  'anyarray',
  'anynonarray',
  'anycompatible',
  'anycompatiblearray',
];
/** Argument types planted in every pair, for two-argument calls. */
const PAIR = [...OP_TYPES, 'anyelement', 'anyarray'];
/** The argument types of the several-argument calls, as written in lib/db (a literal: text). */
const EXACT: readonly (readonly [string, readonly string[]])[] = [
  ['jsonb_build_object', ['text', 'text', 'text', 'timestamptz', 'text', 'timestamptz']],
  ['jsonb_build_object', ['text', 'integer', 'text', 'text', 'text', 'text', 'text', 'timestamptz']],
  ['jsonb_build_object', ['text', 'integer', 'text', 'text', 'text', 'timestamptz', 'text', 'text', 'text', 'text']],
  ['json_build_object', ['text', 'text', 'text', 'integer', 'text', 'text']],
  ['jsonb_build_object', ['text', 'jsonb', 'text', 'integer', 'text', 'integer']],
  ['json_build_array', ['text', 'text', 'boolean']],
  ['set_config', ['varchar', 'varchar', 'boolean']],
  ['set_config', ['text', 'text', 'boolean']],
  ['substr', ['text', 'integer', 'integer']],
  ['substr', ['varchar', 'integer', 'integer']],
  ['generate_series', ['timestamptz', 'timestamptz', 'interval']],
  ['generate_series', ['timestamp', 'timestamp', 'interval']],
];

/** What a planted operator returns: whatever lets the statement plan, so that it is called. */
function opReturns(op: string, a: string, b: string): string {
  if (COMPARISONS.includes(op) || op === '@>' || op === '?') return 'boolean';
  if (op === '->') return 'jsonb';
  if (op === '->>') return 'text';
  if (op === '||') return a.endsWith('[]') ? a : b.endsWith('[]') ? b : a === 'jsonb' ? 'jsonb' : 'text';
  if (a === 'timestamptz' || b === 'timestamptz') return op === '-' && a === b ? 'interval' : 'timestamptz';
  if (a === 'interval' || b === 'interval') return 'interval';
  return a;
}

const POLY = /^any/;

/** SQL that plants every overload; `returns` holds pg_catalog's result type per function name. */
function plantSql(returns: Map<string, { type: string; set: boolean }>): string {
  const lines = ['CREATE SCHEMA evil;'];
  let n = 0;
  for (const op of ['||', ...COMPARISONS, ...ARITHMETIC]) {
    for (const a of OP_TYPES) {
      for (const b of OP_TYPES) {
        const fn = `evil.op_${++n}`;
        lines.push(
          `CREATE FUNCTION ${fn}(a ${a}, b ${b}) RETURNS ${opReturns(op, a, b)} LANGUAGE plpgsql AS ` +
            `$$BEGIN RAISE EXCEPTION 'evil operator %(%, %) called', '${op}', '${a}', '${b}'; END$$;`,
          `CREATE OPERATOR evil.${op} (LEFTARG = ${a}, RIGHTARG = ${b}, FUNCTION = ${fn});`,
        );
      }
    }
  }
  for (const op of COMPARISONS) {
    for (const a of [...OP_TYPES, ...CATALOG_TYPES]) {
      for (const b of [...OP_TYPES, ...CATALOG_TYPES]) {
        if (!CATALOG_TYPES.includes(a) && !CATALOG_TYPES.includes(b)) continue; // planted above
        const fn = `evil.op_${++n}`;
        lines.push(
          `CREATE FUNCTION ${fn}(a ${a}, b ${b}) RETURNS boolean LANGUAGE plpgsql AS ` +
            `$$BEGIN RAISE EXCEPTION 'evil operator %(%, %) called', '${op}', '${a}', '${b}'; END$$;`,
          `CREATE OPERATOR evil.${op} (LEFTARG = ${a}, RIGHTARG = ${b}, FUNCTION = ${fn});`,
        );
      }
    }
  }
  for (const op of JSONB_OPS) {
    for (const b of OP_TYPES) {
      const fn = `evil.op_${++n}`;
      lines.push(
        `CREATE FUNCTION ${fn}(a jsonb, b ${b}) RETURNS ${opReturns(op, 'jsonb', b)} LANGUAGE plpgsql AS ` +
          `$$BEGIN RAISE EXCEPTION 'evil operator %(jsonb, %) called', '${op}', '${b}'; END$$;`,
        `CREATE OPERATOR evil.${op} (LEFTARG = jsonb, RIGHTARG = ${b}, FUNCTION = ${fn});`,
      );
    }
  }
  const signatures = new Map<string, [string, readonly string[]]>();
  const add = (name: string, args: readonly string[]) => signatures.set(`${name}(${args.join(',')})`, [name, args]);
  for (const [name, arities] of Object.entries(CALLED)) {
    for (const arity of arities) {
      for (const t of ONE)
        add(
          name,
          Array.from({ length: arity }, () => t),
        );
      if (arity === 2) for (const a of PAIR) for (const b of PAIR) add(name, [a, b]);
    }
  }
  for (const [name, args] of EXACT) add(name, args);
  for (const [name, args] of signatures.values()) {
    const ret = returns.get(name);
    // A polymorphic result needs a polymorphic argument of its family: text does for the test.
    const type = !ret || POLY.test(ret.type) || ret.type === 'record' ? 'text' : ret.type;
    const sig = `${name}(${args.join(', ')})`;
    lines.push(
      `CREATE FUNCTION evil."${name}"(${args.map((a, i) => `a${i} ${a}`).join(', ')}) ` +
        `RETURNS ${ret?.set ? 'SETOF ' : ''}${type} LANGUAGE plpgsql AS ` +
        `$$BEGIN RAISE EXCEPTION 'evil function % called', '${sig}'; END$$;`,
    );
  }
  // Zero-argument calls: a planted function of the same name and no argument, or one with a
  // default or a variadic argument, could match `now()` too; pg_catalog's, of the same (empty)
  // argument list and first on the path, wins. A planted result of pg_catalog's type, so that
  // the statement would plan with it.
  for (const name of [...ZERO_ARG, 'count']) {
    const ret = returns.get(name);
    const type = !ret || ret.type === 'record' ? 'text' : ret.type;
    if (name !== 'count') {
      lines.push(
        `CREATE FUNCTION evil."${name}"() RETURNS ${type} LANGUAGE plpgsql AS ` +
          `$$BEGIN RAISE EXCEPTION 'evil function %() called', '${name}'; END$$;`,
        `CREATE FUNCTION evil."${name}"(VARIADIC a text[]) RETURNS ${type} LANGUAGE plpgsql AS ` +
          `$$BEGIN RAISE EXCEPTION 'evil function %(VARIADIC text[]) called', '${name}'; END$$;`,
      );
    }
    lines.push(
      `CREATE FUNCTION evil."${name}"(a integer DEFAULT 0) RETURNS ${name === 'count' ? 'bigint' : type} LANGUAGE plpgsql AS ` +
        `$$BEGIN RAISE EXCEPTION 'evil function %(integer DEFAULT 0) called', '${name}'; END$$;`,
    );
  }
  // SQL's own forms, for each of the statements' types (both arguments alike).
  for (const name of KEYWORD_FORMS) {
    for (const a of PAIR.filter((t) => !POLY.test(t))) {
      lines.push(
        `CREATE FUNCTION evil."${name}"(a ${a}, b ${a}) RETURNS ${a} LANGUAGE plpgsql AS ` +
          `$$BEGIN RAISE EXCEPTION 'evil function %(%, %) called', '${name}', '${a}', '${a}'; END$$;`,
      );
    }
  }
  return lines.join('\n');
}

const events: string[] = [];
const started = new Set<string>();
let doomedRuns = 0;

@Processor('sp')
class Handlers {
  @Process('ok')
  ok(job: ActiveJob<{ tag: string }>) {
    events.push(`ran:${job.payload.tag}`);
    return { tag: job.payload.tag };
  }

  @Process('progress')
  async progress(job: ActiveJob<{ tag: string }>) {
    await job.updateProgress(50);
    await job.updateProgress({ done: 2, total: 2 });
    job.log('a line of the job log');
    return job.payload.tag;
  }

  @Process('steps')
  async steps(job: ActiveJob<{ tag: string }>) {
    await job.step('a', () => 1);
    await job.step('b', async ({ client }) => (await client.query('SELECT 1 AS one')).rows[0], { transaction: true });
    await job.sleep('nap', 10);
    await job.waitFor('go', { timeoutMs: 60_000 });
    events.push(`ran:${job.payload.tag}`);
    return job.payload.tag;
  }

  @Process('flaky')
  flaky(job: ActiveJob<{ tag: string }>) {
    if (job.attempt === 1) throw new Error('first attempt fails');
    events.push(`ran:${job.payload.tag}`);
  }

  @Process('doomed')
  doomed() {
    doomedRuns++;
    throw new Error('always fails');
  }

  @Process('long')
  long(job: ActiveJob<{ tag: string }>) {
    started.add(job.payload.tag);
    return new Promise<void>((_, reject) => job.signal.addEventListener('abort', () => reject(new Error('aborted'))));
  }
}

@Processor('sp-limited')
class Limited {
  @Process('ok')
  ok(job: ActiveJob<{ tag: string }>) {
    return job.payload.tag;
  }
}

describe('search_path hijack', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let dashboardPool: Pool;
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
      timeoutMs: 20_000,
    });

  beforeAll(async () => {
    await migrate(t.pool, 'pgqueue');
    const { rows } = await t.pool.query<{ proname: string; ret: string; set: boolean }>(
      `SELECT DISTINCT ON (proname) proname, prorettype::regtype::text AS ret, proretset AS set
       FROM pg_catalog.pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace AND proname = ANY($1::text[])
       ORDER BY proname, pronargs`,
      [[...Object.keys(CALLED), ...ZERO_ARG]],
    );
    await t.pool.query(plantSql(new Map(rows.map((r) => [r.proname, { type: r.ret, set: r.set }]))));
    // Every new session of this database has the planted schema on its path (pg_catalog stays
    // first, implicitly, as for any role whose path does not name it).
    await t.pool.query(`ALTER DATABASE ${t.db.name} SET search_path = evil, public`);
    app = await bootApp({
      options: options(),
      queues: [
        // A schedule ticking every second: the cron statements (claim of the tick, insert) run too.
        { name: 'sp', concurrency: 4, repeat: [{ name: 'ok', cron: '* * * * * *', payload: { tag: 'cron' } }] },
        { name: 'sp-limited', concurrency: 2, globalConcurrency: 1, limiter: { max: 100, durationMs: 1000 } },
      ],
      providers: [Handlers, Limited],
    });
    runtimeOf(app).supervisor.on('error', (err) => errors.push(err.message));
    await waitFor(() => runtimeOf(app).supervisor.listenerState?.connected === true, { message: 'the listener' });
    dashboardPool = testPool(t.db.url, 3);
  });
  afterAll(async () => {
    await app?.close();
    await dashboardPool?.end();
  });

  it('the planted functions and operators are on the path: statements of the same shapes call them', async () => {
    const c = await dashboardPool.connect();
    try {
      expect((await c.query<{ search_path: string }>('SHOW search_path')).rows[0]).toEqual({ search_path: 'evil, public' });
      await expect(c.query(`SELECT '!cancel|'::text || 5::bigint`)).rejects.toThrow(/evil operator \|\|\(text, bigint\)/);
      await expect(c.query(`SELECT unnest($1::text[])`, [['a']])).rejects.toThrow(/evil function unnest\(text\[\]\)/);
      await expect(c.query(`SELECT array_agg(x) FROM (VALUES (1::bigint)) v(x)`)).rejects.toThrow(
        /evil function array_agg\(bigint\)/,
      );
      await expect(c.query(`SELECT jsonb_build_array('{}'::jsonb)`)).rejects.toThrow(/evil function jsonb_build_array\(jsonb\)/);
      await expect(c.query(`SELECT count(*) FROM pg_catalog.pg_class WHERE oid = $1::regclass`, ['pg_class'])).rejects.toThrow(
        /evil operator =\(oid, regclass\)/,
      );
      // Qualified, the same calls take pg_catalog's; zero-argument calls take pg_catalog's anyway,
      // and so do SQL's own forms.
      expect((await c.query(`SELECT coalesce(NULL::text, 'a'::text) AS c, greatest(1::bigint, 2::bigint) AS g`)).rows).toEqual([
        { c: 'a', g: '2' },
      ]);
      await c.query(`SELECT count(*) FROM pg_catalog.pg_class WHERE oid = $1::regclass::oid`, ['pg_class']);
      await c.query(`SELECT clock_timestamp(), (SELECT system_identifier FROM pg_catalog.pg_control_system())`);
      expect((await c.query(`SELECT pg_catalog.unnest($1::text[]) AS u`, [['a']])).rows).toEqual([{ u: 'a' }]);
      await c.query(`SELECT now(), pg_backend_pid(), current_database(), count(*) FROM (VALUES (1)) v`);
    } finally {
      c.release();
    }
  });

  it('the queue and the dashboard run without calling any of them', async () => {
    const queues = app.get(QueueService);
    const queue = queues.getQueue('sp');
    await queue.add('ok', { tag: 'single' });
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'ok', payload: { tag: `bulk${i}` } })));
    await queue.add('ok', { tag: 'delayed' }, { delayMs: 50 });
    await queue.add('ok', { tag: 'unique' }, { uniqueKey: 'u1' });
    await queue.addBulk([{ name: 'ok', payload: { tag: 'unique-bulk' }, opts: { uniqueKey: 'u2' } }]);
    await queue.add('progress', { tag: 'progress' });
    await queue.add('flaky', { tag: 'flaky' }, { attempts: 2, backoff: { type: 'fixed', delayMs: 20 } });
    const doomed = await queue.add('doomed', { tag: 'doomed' }, { attempts: 1 });
    const long = await queue.add('long', { tag: 'long' });
    const later = await queue.add('ok', { tag: 'later' }, { delayMs: 3_600_000 });
    const removable = await queue.add('ok', { tag: 'removable' }, { delayMs: 3_600_000 });
    const flow = await queues.addFlow({
      queue: 'sp',
      name: 'ok',
      payload: { tag: 'flow-parent' },
      children: [
        { queue: 'sp', name: 'ok', payload: { tag: 'flow-child-1' } },
        { queue: 'sp-limited', name: 'ok', payload: { tag: 'flow-child-2' } },
      ],
    });
    await queues.getQueue('sp-limited').add('ok', { tag: 'limited' });
    for (const tag of ['single', 'bulk1', 'bulk2', 'bulk3', 'delayed', 'unique', 'unique-bulk', 'progress', 'flaky']) {
      await ended(tag, 'completed');
    }
    for (const tag of ['limited', 'flow-child-1', 'flow-child-2', 'flow-parent']) await ended(tag, 'completed');
    // Durable steps (steps.ts): a step, a transactional one, a sleep, a wait and its signal.
    const stepped = await queue.add('steps', { tag: 'steps' });
    await waitFor(async () => (await queue.getJobSteps(stepped.id)).some((s) => s.name === 'go' && s.status === 'waiting'), {
      message: () => `the steps job to wait for its signal (errors: ${errors.join(' | ')})`,
      timeoutMs: 20_000,
    });
    expect(await queue.signal(stepped.id, 'go', { ok: true })).toBe(true);
    await ended('steps', 'completed');
    // The schedule's ticks: one of them run (more may be waiting, one a second).
    await waitFor(
      async () =>
        (await t.pool.query(`SELECT 1 FROM pgqueue.job_history WHERE payload->>'tag' = 'cron' AND state = 'completed'`))
          .rowCount! > 0,
      { message: () => `a tick of the schedule to complete (errors: ${errors.join(' | ')})`, timeoutMs: 20_000 },
    );
    await ended('doomed', 'failed');
    expect((await queues.getJob(flow.job.id))?.state).toBe('completed');
    expect((await queue.getJob(doomed.id))?.state).toBe('failed');
    expect((await queue.getCounts()).failed).toBe(1);

    await waitFor(() => started.has('long'), { message: 'the long job to start' });
    expect(await queue.cancel(long.id)).toBe('cancelling');
    await ended('long', 'cancelled');
    expect(await queue.cancel(later.id)).toBe('cancelled');
    expect(await queue.remove(removable.id)).toBe(true);
    await queue.pause();
    expect(await queue.isPaused()).toBe(true);
    await queue.resume();

    expect(await queue.retry(doomed.id)).toBe(true);
    const failedAgain = async (runs: number) => {
      await waitFor(() => doomedRuns === runs, {
        message: () => `run ${runs} of the retried job (errors: ${errors.join(' | ')})`,
      });
      await ended('doomed', 'failed');
    };
    await failedAgain(2);
    expect(await queue.retryFailed()).toBe(1);
    await failedAgain(3);

    // The operator's reads and changes (find.ts, change.ts).
    for (const state of ['waiting', 'delayed', 'active', 'waiting-children', 'completed', 'failed', 'cancelled'] as const) {
      const first = await queue.getJobs({ state, limit: 1 });
      if (first.next) await queue.getJobs({ state, limit: 1, after: first.next });
      await queue.getJobs({ state, name: 'ok', limit: 10 });
    }
    await queue.getJobs({ limit: 5 });
    expect((await queue.getJobCounts()).failed).toBe(1);
    await queue.getJobByKey('u1');
    // Job logs (job-logs.ts): the append ran with the progress job; a page of them, and none.
    const progressJob = (await queue.getJobs({ state: 'completed', name: 'progress', limit: 1 })).jobs[0];
    expect(await queue.getJobLogs(progressJob.id, { offset: 0, limit: 10 })).toEqual({
      logs: ['a line of the job log'],
      count: 1,
      dropped: 0,
    });
    expect((await queue.getJobLogs('999999999')).count).toBe(0);
    const movable = await queue.add('ok', { tag: 'movable' }, { delayMs: 3_600_000 });
    expect(await queue.changePriority(movable.id, 3)).toBe(true);
    expect(await queue.updatePayload(movable.id, { tag: 'movable' })).toBe(true);
    expect(await queue.changeDelay(movable.id, 3_600_000)).toBe(true);
    expect(await queue.promote(movable.id)).toBe(true);
    await ended('movable', 'completed');
    await queue.add('ok', { tag: 'promoted' }, { delayMs: 3_600_000 });
    expect(await queue.promoteJobs({ name: 'ok' })).toBe(1);
    await ended('promoted', 'completed');

    // Changes of many jobs (bulk.ts, bulk-live.ts, bulk-history.ts), each statement with a row to change.
    const delayed = (tag: string) => queue.add('ok', { tag }, { delayMs: 3_600_000 });
    expect(await queue.removeJobs({ ids: [(await delayed('bulk-1')).id] })).toBe(1);
    expect(await queue.cancelJobs({ ids: [(await delayed('bulk-2')).id] })).toBe(1);
    await delayed('bulk-3');
    expect(await queue.cancelJobs({ state: 'delayed', name: 'ok' })).toBe(1);
    await delayed('bulk-4');
    expect(await queue.removeJobs({ states: ['waiting', 'delayed'], name: 'ok' })).toBe(1);
    await delayed('bulk-5');
    expect(await queue.removeJobs({ state: 'delayed' })).toBe(1);
    expect(await queue.retryJobs({ state: 'cancelled', name: 'ok', finishedBefore: Date.now() + 60_000 })).toBeGreaterThan(0);
    await ended('bulk-3', 'completed');
    expect(await queue.removeJobs({ state: 'completed', name: 'ok', finishedBefore: Date.now() + 60_000 })).toBeGreaterThan(0);

    const supervisor = runtimeOf(app).supervisor;
    await supervisor.heartbeat();
    await supervisor.maintain();
    // Job schedulers (migration 14): the upsert, reads, pause, resume, run now, and a tick's claim
    // and write (here, or on the app's own ticker: its errors land in `errors` too).
    // The app's own code-declared schedules are rows too: count the two added here on top of them.
    const declared = await queue.getJobSchedulersCount();
    await queue.upsertJobScheduler('sp-sched', { every: 60_000 }, { name: 'ok', payload: { tag: 'scheduled' } });
    await queue.upsertJobScheduler(
      'sp-cron',
      { pattern: '0 3 * * *', tz: 'Europe/Berlin' },
      { name: 'ok', payload: { tag: 'cron' } },
    );
    await supervisor.tickSchedulers();
    await waitFor(async () => ((await queue.getJobScheduler('sp-sched'))?.iterationCount ?? 0) >= 1, {
      timeoutMs: 20_000,
      message: 'the scheduler to tick',
    });
    expect(await queue.getJobSchedulersCount()).toBe(declared + 2);
    expect((await queue.getJobSchedulers(0, -1, false)).map((x) => x.id)).toHaveLength(declared + 2);
    expect(await queue.pauseJobScheduler('sp-cron')).toBe(true);
    expect(await queue.resumeJobScheduler('sp-cron')).toBe(true);
    expect(await queue.runJobSchedulerNow('sp-cron')).not.toBeNull();
    await ended('cron', 'completed');
    expect(await queue.removeJobScheduler('sp-sched')).toBe(true);

    // The dashboard's reads and actions, on sessions with the planted path.
    const store = new DashboardStore(dashboardPool, 'pgqueue', 'pgqueue_jobs');
    expect((await store.counts(['sp', 'sp-limited'])).map((r) => r.name)).toEqual(['sp', 'sp-limited']);
    await store.counts(['sp'], 'sp');
    await store.throughput();
    await store.throughput(new Date(Date.now() - 60_000));
    expect(await store.names('sp')).toEqual(expect.any(Array));
    // The groups read (group-counts.ts), on a queue with a grouped job.
    await t.pool.query(`UPDATE pgqueue.jobs SET group_key = 'tenant' WHERE queue = 'sp' AND state = 'waiting'`);
    expect((await store.groups('sp', 20)).scanned).toEqual(expect.any(Object));
    await queue.getGroupCounts({ orderBy: 'oldest' });
    const states: ListState[] = ['waiting', 'delayed', 'active', 'waiting-children', 'completed', 'failed', 'cancelled'];
    for (const state of states) {
      const first = await store.listJobs('sp', state, {}, null, 1);
      if (first.next) await store.listJobs('sp', state, {}, first.next, 1);
      await store.listJobs('sp', state, { name: 'ok', payloadJson: '{"tag":"single"}' }, null, 10);
    }
    await store.listJobs('sp', 'waiting', { uniqueKey: 'u1' }, null, 10);
    // The dashboard's capped counts for an action's confirmation (every state, a name, an age).
    for (const state of states) await store.countMatching('sp', state, 'ok', state === 'failed' ? 60_000 : null, 10);
    expect((await store.job(doomed.id))?.id).toBe(doomed.id);
    expect((await store.jobLogs(progressJob.id, 0, 10))?.logs).toEqual(['a line of the job log']);
    expect(await store.flow(flow.job.id)).not.toBeNull();
    expect(await store.locate([doomed.id, long.id])).toHaveLength(2);
    expect((await store.nodes()).length).toBeGreaterThan(0);
    // sp-cron beside the app's code-declared schedules; sp-sched was removed above.
    const listed = (await store.schedulers()).map((x) => x.id);
    expect([listed.includes('sp-cron'), listed.includes('sp-sched')]).toEqual([true, false]);
    expect(await store.retryIds([doomed.id])).toEqual([doomed.id]);
    await failedAgain(4);
    expect(await store.retryFailed('sp', 'doomed')).toBe(1);
    await failedAgain(5);

    // The operator's bulk removals (issue 27): drain (a job another waits on goes one per
    // statement, naming itself to the trigger), clean, and obliterate with force (every live state).
    await queue.add('ok', { tag: 'to-drain' }, { delayMs: 3_600_000 });
    await queues.addFlow({
      queue: 'sp',
      name: 'ok',
      payload: { tag: 'drained-parent' },
      children: [{ queue: 'sp', name: 'ok', payload: { tag: 'drained-child' }, opts: { delayMs: 3_600_000 } }],
    });
    expect(await queue.drain()).toBe(2);
    await ended('drained-parent', 'failed');
    expect(await queue.clean({ state: 'completed', olderThanMs: 0, limit: 1 })).toBe(1);
    expect(await queue.obliterate({ force: true })).toBeGreaterThan(0);

    // The CLI's doctor reads (lib/db/doctor.ts), on a session with the planted path.
    const doctor = new DoctorReads(poolExecutor(dashboardPool), 'pgqueue');
    await doctor.xminHolders();
    await doctor.otherHolders();
    await doctor.silentNodes();
    expect(await doctor.jobsVacuumStats()).toHaveProperty('lastAutovacuum');
    expect(await doctor.listeners('LISTEN "pgqueue_jobs"')).toBe(1);

    expect(errors).toEqual([]);
  });

  it('lib/db writes every built-in function it calls with arguments as pg_catalog.fn(...)', async () => {
    const { rows } = await t.pool.query<{ proname: string }>(
      `SELECT DISTINCT proname FROM pg_catalog.pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace`,
    );
    const builtIn = new Set(rows.map((r) => r.proname));
    // Not calls of a searched function: EXTRACT(field FROM x) becomes pg_catalog.extract in the
    // parser; bit(60) is a type modifier; name() and path() are TypeScript.
    const notCalls = new Set(['extract', 'bit', 'name', 'path']);
    const dir = join(__dirname, '../../lib/db');
    const files = (function walk(d: string): string[] {
      return readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [join(d, f)]));
    })(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('migrations.generated.ts'));
    const found: string[] = [];
    for (const file of files) {
      const src = readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' '))
        .replace(/^\s*\/\/.*$/gm, '');
      for (const m of src.matchAll(/(?<![\w.$"])([a-z_][a-z0-9_]*)\s*\((?=\s*([^)\s]))/g)) {
        if (!builtIn.has(m[1]) || notCalls.has(m[1]) || m[2] === '*') continue;
        const line = src.slice(0, m.index).split('\n').length;
        found.push(`${file.slice(dir.length + 1)}:${line} ${m[1]}(`);
      }
      // A relation compared by name: oid = $1::regclass takes a planted =(oid, regclass) (statements
      // the life above may not reach, such as the legacy history's, are checked here).
      for (const m of src.matchAll(/\$\d+::regclass\b(?!::oid)/g)) {
        found.push(`${file.slice(dir.length + 1)}:${src.slice(0, m.index).split('\n').length} ${m[0]} (write ${m[0]}::oid)`);
      }
      for (const m of src.matchAll(/(?<![\w.$"])([a-z_][a-z0-9_]*)\s*\(\s*\)/g)) {
        if (builtIn.has(m[1]) && !ZERO_ARG.includes(m[1])) {
          found.push(`${file.slice(dir.length + 1)}: ${m[1]}() is not planted above (add it to ZERO_ARG)`);
        }
      }
      for (const m of src.matchAll(/pg_catalog\.([a-z_][a-z0-9_]*)\s*\((?=\s*[^)\s])/g)) {
        if (builtIn.has(m[1]) && !(m[1] in CALLED) && !['pg_get_userbyid', 'pg_has_role'].includes(m[1])) {
          found.push(`${file.slice(dir.length + 1)}: pg_catalog.${m[1]}( is not planted above (add it to CALLED)`);
        }
      }
    }
    expect(found).toEqual([]);
  });
});
