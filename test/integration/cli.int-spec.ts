import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { DataSource, type MigrationInterface } from 'typeorm';
import ts from 'typescript';
import * as lib from '../../lib';
import { pgQueueMigrations, type Job } from '../../lib';
import { CliDatabase } from '../../lib/cli/database';
import { loadMigrations } from '../../lib/db/migrator';
import { assertBuilt } from '../support/built';
import { cli } from '../support/cli';
import { useTestDatabase, waitFor } from '../support/database';
import { ROOT, typeCheck } from '../support/readme';

// Issue 27 point 7: `npx nestjs-pg-queue ...` against a fresh database, in-process (runCli, what
// bin.ts runs) for every command, and one run of the built bin as a child process.

const execFileAsync = promisify(execFile);
const BIN = path.resolve(__dirname, '../../dist/cli/bin.js');

describe('nestjs-pg-queue CLI', () => {
  const t = useTestDatabase();
  let db: CliDatabase;
  const url = () => t.db.url;

  afterAll(async () => {
    await db?.close();
  });

  /** Claims every due job of `queue` and settles each as `kind` (what a worker's outcome writes). */
  async function finish(queue: string, kind: 'failed' | 'completed'): Promise<void> {
    const rows = await db.store.claim(queue, 100, 'test-worker', 30_000);
    await db.store.settle(
      rows.map((r) =>
        kind === 'completed'
          ? { kind, id: String(r.id), attempt: r.attempt, resultJson: null }
          : {
              kind,
              id: String(r.id),
              attempt: r.attempt,
              claimedAtMs: r.started_at_ms,
              errorJson: JSON.stringify({ attempt: r.attempt, name: 'Error', message: 'boom', at: new Date().toISOString() }),
            },
      ),
      'test-worker',
    );
  }

  describe('usage', () => {
    it('no command: the command list on stderr, exit 2; --help: on stdout, exit 0', async () => {
      const none = await cli(url(), []);
      expect(none.code).toBe(2);
      expect(none.err).toContain('jobs list');
      const help = await cli(url(), ['--help']);
      expect(help.code).toBe(0);
      expect(help.out).toMatch(/Commands:[\s\S]*doctor/);
    });

    it('each command has its own --help, and exits 0 without connecting', async () => {
      const r = await cli(undefined, ['jobs', 'list', '--help']);
      expect(r.code).toBe(0);
      expect(r.out).toContain('Usage: nestjs-pg-queue jobs list --queue <name>');
      expect(r.out).toMatch(/--state <state>/);
      expect(r.out).toMatch(/--url <url>/);
      const drain = await cli(undefined, ['drain', '-h']);
      expect(drain.out).toMatch(/-y, --yes/);
    });

    it('an unknown command, an unknown flag, a missing value: exit 2 with a message naming it', async () => {
      const cmd = await cli(url(), ['jobz']);
      expect(cmd.code).toBe(2);
      expect(cmd.err).toContain('unknown command "jobz"');
      const flag = await cli(url(), ['status', '--queu', 'x']);
      expect(flag.code).toBe(2);
      expect(flag.err).toContain('Unknown flag --queu for `status`');
      const value = await cli(url(), ['jobs', 'list', '--queue']);
      expect(value.code).toBe(2);
      expect(value.err).toContain('--queue');
      const missing = await cli(url(), ['clean', '--queue', 'q', '--state', 'completed', '--yes']);
      expect(missing.code).toBe(2);
      expect(missing.err).toContain('needs --older-than');
      const extra = await cli(url(), ['status', 'extra']);
      expect(extra.code).toBe(2);
      expect(extra.err).toContain('takes no arguments');
    });

    it('the common flags may come before the command; `jobs` alone names its subcommands', async () => {
      const before = await cli(undefined, ['--url', url(), '--json', 'jobs', 'list', '--help']);
      expect(before.code).toBe(0);
      expect(before.out).toContain('Usage: nestjs-pg-queue jobs list');
      const jobs = await cli(url(), ['jobs']);
      expect(jobs.code).toBe(2);
      expect(jobs.err).toContain('`jobs` needs one of list, show, retry, remove, cancel, promote');
    });

    it('a server that is not there: exit 1, saying where it tried', async () => {
      const r = await cli(undefined, ['status', '--url', 'postgres://postgres@127.0.0.1:1/none']);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/127\.0\.0\.1:1/);
      expect(r.err).toContain('--url');
    });

    it('no database, or a bad --schema: exit 2, saying what to pass', async () => {
      const none = await cli(undefined, ['status']);
      expect(none.code).toBe(2);
      expect(none.err).toContain('set DATABASE_URL');
      const schema = await cli(url(), ['status', '--schema', 'Bad-Schema']);
      expect(schema.code).toBe(2);
      expect(schema.err).toMatch(/--schema: Invalid schema "Bad-Schema"/);
    });

    it('--json errors: { error, exitCode } on stdout as well', async () => {
      const r = await cli(url(), ['jobs', 'list', '--json']);
      expect(r.code).toBe(2);
      expect(r.json()).toEqual({ error: expect.stringContaining('needs --queue'), exitCode: 2 });
    });
  });

  describe('migrate', () => {
    it('before migrating, other commands refuse a schema with no tables (exit 1)', async () => {
      const r = await cli(url(), ['status']);
      expect(r.code).toBe(1);
      expect(r.err).toContain('nestjs-pg-queue migrate');
    });

    it('--print: the SQL of every pending migration, nothing applied; the script itself migrates a schema', async () => {
      const r = await cli(url(), ['migrate', '--print', '--schema', 'printed']);
      expect(r.code).toBe(0);
      const all = loadMigrations().map((m) => m.version);
      expect(r.out).toMatch(/^-- nestjs-pg-queue: migration\(s\) 1, 2/);
      expect(r.out).toContain('BEGIN;');
      expect(r.out.trimEnd().endsWith('COMMIT;')).toBe(true);
      const { rows } = await t.pool.query(`SELECT pg_catalog.to_regclass('printed.migrations') AS t`);
      expect(rows[0].t).toBeNull();
      // Run as printed (a simple-query batch, as psql -f does), then migrate finds nothing to do.
      await t.pool.query(r.out);
      const again = await cli(url(), ['migrate', '--schema', 'printed', '--json']);
      expect(again.json()).toMatchObject({ applied: [], from: all[all.length - 1] });
      const none = await cli(url(), ['migrate', '--print', '--schema', 'printed']);
      expect(none.out).toContain('no migration is pending');
    });

    it('applies every migration and creates the history partitions; a second run applies none', async () => {
      const r = await cli(url(), ['migrate', '--json']);
      expect(r.code).toBe(0);
      const doc = r.json<{ applied: number[]; partitions: string[]; schema: string }>();
      expect(doc.schema).toBe('pgqueue');
      expect(doc.applied).toEqual(loadMigrations().map((m) => m.version));
      expect(doc.partitions.length).toBe(3);
      const again = await cli(url(), ['migrate']);
      expect(again.out).toContain('is up to date');
      db = await CliDatabase.open(url(), undefined, () => undefined);
    });

    it('--typeorm <dir>: one file per migration, named as pgQueueMigrations() names them, that TypeORM runs; a rerun keeps them', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-typeorm-'));
      try {
        const r = await cli(url(), ['migrate', '--typeorm', dir, '--json']);
        expect(r.code).toBe(0);
        const files = fs.readdirSync(dir).sort();
        const names = pgQueueMigrations().map((c) => c.name);
        expect(files).toEqual(names.map((n) => `${n.slice(-13)}-${n}.ts`).sort());
        const first = fs.readFileSync(path.join(dir, files[0]), 'utf8');
        expect(first).toContain(`export class ${names[0]} implements MigrationInterface`);
        expect(first).toContain("pgQueueMigrations({ schema: 'pgqueue' })");
        const again = await cli(url(), ['migrate', '--typeorm', dir, '--json']);
        expect(again.json()).toMatchObject({ written: [], kept: expect.arrayContaining([path.join(dir, files[0])]) });
        expect(await cli(url(), ['migrate', '--typeorm', dir, '--print'])).toMatchObject({ code: 2 });

        // The files type-check as an app's (strict), and TypeORM runs them: a schema they made
        // is one `migrate` finds up to date.
        const sources = Object.fromEntries(
          files.map((f) => [path.join(ROOT, 'test', '.typeorm-probe', f), fs.readFileSync(path.join(dir, f), 'utf8')]),
        );
        expect(typeCheck(sources)).toEqual([]);
        const sch = await cli(url(), ['migrate', '--typeorm', path.join(dir, 'other'), '--schema', 'typeorm_made']);
        expect(sch.code).toBe(0);
        const classes = fs.readdirSync(path.join(dir, 'other')).map((f) => {
          const js = ts.transpileModule(fs.readFileSync(path.join(dir, 'other', f), 'utf8'), {
            compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
          }).outputText;
          const exports: Record<string, new () => MigrationInterface> = {};
          new Function('require', 'exports', js)((m: string) => (m === 'nestjs-pg-queue' ? lib : require(m)), exports);
          return Object.values(exports)[0];
        });
        const ds = new DataSource({ type: 'postgres', url: url(), migrations: classes });
        await ds.initialize();
        try {
          expect(await ds.runMigrations({ transaction: 'each' })).toHaveLength(loadMigrations().length);
        } finally {
          await ds.destroy();
        }
        expect((await cli(url(), ['migrate', '--schema', 'typeorm_made', '--json'])).json()).toMatchObject({ applied: [] });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('status and jobs', () => {
    let jobs: Job[];
    let delayed: Job;

    beforeAll(async () => {
      const q = db.queue('mail');
      jobs = await q.addBulk([
        { name: 'welcome', payload: { user: 1 } },
        { name: 'welcome', payload: { user: 2 } },
        { name: 'digest', payload: { user: 3 } },
      ]);
      delayed = await q.add('digest', { user: 4 }, { delayMs: 3_600_000 });
    });

    it('status: per queue counts, paused, oldest waiting; nodes and listeners; --json has the same', async () => {
      const r = await cli(url(), ['status', '--json']);
      expect(r.code).toBe(0);
      const doc = r.json<{ queues: Record<string, unknown>[]; nodes: unknown[]; listeners: number; version: number }>();
      expect(doc.queues).toEqual([
        expect.objectContaining({ name: 'mail', waiting: 3, delayed: 1, active: 0, failed: 0, paused: false }),
      ]);
      expect(doc.nodes).toEqual([]);
      expect(doc.listeners).toBe(0);
      const human = await cli(url(), ['status']);
      const lines = human.out.split('\n');
      const header = lines.find((l) => l.startsWith('QUEUE'))!;
      const row = lines.find((l) => l.startsWith('mail'))!;
      expect(header).toMatch(/QUEUE\s+PAUSED\s+WAITING\s+DELAYED/);
      // aligned: the WAITING figure ends where its header does
      expect(
        row
          .slice(0, header.indexOf('WAITING') + 'WAITING'.length)
          .trimEnd()
          .endsWith('3'),
      ).toBe(true);
      expect(human.out).toContain('No live nodes');

      // A node heartbeating (its registry row, as a worker process writes it) is listed.
      await t.pool.query(
        `INSERT INTO pgqueue.nodes (id, host, pid, started_at, last_seen_at, heartbeat_ms, queues)
         VALUES ('live-node', 'host-b', 99, now(), now(), 3600000, '[{"name":"mail","concurrency":5}]')`,
      );
      try {
        const withNode = await cli(url(), ['status', '--json']);
        expect(withNode.json<{ nodes: unknown[] }>().nodes).toEqual([
          expect.objectContaining({
            id: 'live-node',
            host: 'host-b',
            pid: 99,
            running: 0,
            queues: [{ name: 'mail', concurrency: 5 }],
          }),
        ]);
        expect((await cli(url(), ['status'])).out).toMatch(/live-node\s+host-b\s+99\s+0\s+\S+ ago[\s\S]*mail\(5\)/);
      } finally {
        await t.pool.query(`DELETE FROM pgqueue.nodes WHERE id = 'live-node'`);
      }
    });

    it('jobs list: by state and name, paged with --after; --json is { queue, jobs, next }', async () => {
      const first = await cli(url(), [
        'jobs',
        'list',
        '--queue',
        'mail',
        '--state',
        'waiting',
        '--name',
        'welcome',
        '--limit',
        '1',
        '--json',
      ]);
      expect(first.code).toBe(0);
      const p1 = first.json<{ jobs: Job[]; next: string | null; queue: string }>();
      expect(p1.jobs.map((j) => j.id)).toEqual([jobs[0].id]);
      expect(p1.next).toEqual(expect.any(String));
      const second = await cli(url(), [
        'jobs',
        'list',
        '--queue',
        'mail',
        '--state',
        'waiting',
        '--name',
        'welcome',
        '--limit',
        '1',
        '--after',
        p1.next!,
        '--json',
      ]);
      expect(second.json<{ jobs: Job[] }>().jobs.map((j) => j.id)).toEqual([jobs[1].id]);
      const both = await cli(url(), ['jobs', 'list', '--queue', 'mail', '--state', 'waiting,delayed']);
      expect(both.out.split('\n').filter((l) => /^\s*\d+\s/.test(l))).toHaveLength(4);
      expect(both.out).toMatch(/ID\s+NAME\s+STATE/);
      const bad = await cli(url(), ['jobs', 'list', '--queue', 'mail', '--state', 'waitin']);
      expect(bad.code).toBe(2);
      expect(bad.err).toContain('waitin');
      expect((await cli(url(), ['jobs', 'list', '--queue', 'mail', '--limit', 'ten'])).code).toBe(2);
    });

    it('jobs show: a job with its payload (exit 0); an unknown id or another queue: exit 1', async () => {
      const r = await cli(url(), ['jobs', 'show', jobs[2].id]);
      expect(r.code).toBe(0);
      expect(r.out).toContain(`Job ${jobs[2].id}`);
      expect(r.out).toMatch(/name\s+digest/);
      expect(r.out).toContain('"user": 3');
      const json = await cli(url(), ['jobs', 'show', jobs[2].id, '--json']);
      expect(json.json<{ job: Job }>().job).toMatchObject({
        id: jobs[2].id,
        queue: 'mail',
        state: 'waiting',
        payload: { user: 3 },
      });
      expect(json.json<{ logs: unknown }>().logs).toEqual({ logs: [], count: 0, dropped: 0 });
      // Its log (job.log() lines, as a worker writes them: migration 12's column), paged.
      await t.pool.query(`UPDATE pgqueue.jobs SET logs = $2::jsonb WHERE id = $1`, [
        jobs[2].id,
        JSON.stringify({ lines: ['first line', 'second line', 'third line'], bytes: 30, dropped: 2 }),
      ]);
      const logged = await cli(url(), ['jobs', 'show', jobs[2].id, '--log-offset', '1', '--log-limit', '1']);
      expect(logged.out).toContain('log (lines 2 to 2 of 3; 2 more dropped over the caps)');
      expect(logged.out).toMatch(/^ +2 {2}second line$/m);
      expect(logged.out).toContain('more: --log-offset 2');
      expect(logged.out).not.toContain('first line');
      const loggedJson = await cli(url(), ['jobs', 'show', jobs[2].id, '--json']);
      expect(loggedJson.json<{ logs: unknown }>().logs).toEqual({
        logs: ['first line', 'second line', 'third line'],
        count: 3,
        dropped: 2,
      });
      expect((await cli(url(), ['jobs', 'show', jobs[2].id, '--log-limit', '0'])).code).toBe(2);
      expect((await cli(url(), ['jobs', 'show', '999999'])).code).toBe(1);
      expect((await cli(url(), ['jobs', 'show', jobs[2].id, '--queue', 'other'])).code).toBe(1);
      expect((await cli(url(), ['jobs', 'show'])).code).toBe(2);
    });

    it('jobs promote: a delayed job by id (exit 0), one that is not delayed (exit 1); by filter', async () => {
      const r = await cli(url(), ['jobs', 'promote', delayed.id, '--json']);
      expect(r.code).toBe(0);
      expect(r.json()).toEqual({
        changed: 1,
        results: [{ id: delayed.id, queue: 'mail', changed: true, outcome: 'promoted (due now)' }],
      });
      const again = await cli(url(), ['jobs', 'promote', delayed.id, '999999']);
      expect(again.code).toBe(1);
      expect(again.out).toMatch(/not delayed/);
      expect(again.out).toMatch(/999999\s+-\s+no such job/);
      await db.queue('mail').add('later', {}, { delayMs: 3_600_000 });
      await db.queue('mail').add('later', {}, { delayMs: 3_600_000 });
      const filter = await cli(url(), ['jobs', 'promote', '--queue', 'mail', '--name', 'later', '--json']);
      expect(filter.json()).toEqual({ queue: 'mail', promoted: 2 });
      expect((await db.queue('mail').getJobCounts('delayed')).delayed).toBe(0);
    });

    it('jobs cancel and remove are refused without --yes when stdin is not a terminal; a terminal is asked', async () => {
      const refused = await cli(url(), ['jobs', 'cancel', jobs[0].id]);
      expect(refused.code).toBe(2);
      expect(refused.err).toContain('Add --yes');
      expect((await db.store.getJob(jobs[0].id))!.state).toBe('waiting');
      const no = await cli(url(), ['jobs', 'cancel', jobs[0].id], false);
      expect(no.code).toBe(1);
      expect(no.err).toContain(`Cancel 1 job(s) (${jobs[0].id})? [y/N]`);
      expect((await db.store.getJob(jobs[0].id))!.state).toBe('waiting');
      const yes = await cli(url(), ['jobs', 'cancel', jobs[0].id], true);
      expect(yes.code).toBe(0);
      expect((await db.store.getJob(jobs[0].id))!.state).toBe('cancelled');
      const removed = await cli(url(), ['jobs', 'remove', jobs[0].id, '--yes', '--json']);
      expect(removed.json()).toMatchObject({ changed: 1 });
      expect(await db.store.getJob(jobs[0].id)).toBeNull();
    });

    it('jobs retry: a failed job by id, then every failed job of the queue', async () => {
      const q = db.queue('flaky');
      const [a, b, c] = await q.addBulk([0, 1, 2].map((i) => ({ name: 'n', payload: { i }, opts: { attempts: 1 } })));
      const [other] = await q.addBulk([{ name: 'other', payload: {}, opts: { attempts: 1 } }]);
      await finish('flaky', 'failed');
      await waitFor(async () => (await q.getJobCounts('failed')).failed === 4);
      const byName = await cli(url(), ['jobs', 'retry', '--queue', 'flaky', '--state', 'failed', '--name', 'other', '--json']);
      expect(byName.json()).toEqual({ queue: 'flaky', retried: 1 });
      expect((await db.store.getJob(other.id))!.state).toBe('waiting');
      expect((await db.store.getJob(a.id))!.state).toBe('failed');
      const one = await cli(url(), ['jobs', 'retry', a.id, '--queue', 'flaky']);
      expect(one.code).toBe(0);
      expect((await db.store.getJob(a.id))!.state).toBe('waiting');
      expect((await cli(url(), ['jobs', 'retry', a.id])).code).toBe(1); // not failed any more
      const all = await cli(url(), ['jobs', 'retry', '--queue', 'flaky', '--state', 'failed', '--json']);
      expect(all.json()).toEqual({ queue: 'flaky', retried: 2 });
      expect((await db.store.getJob(b.id))!.state).toBe('waiting');
      expect((await db.store.getJob(c.id))!.state).toBe('waiting');
      expect((await cli(url(), ['jobs', 'retry', a.id, '--state', 'failed'])).code).toBe(2);
    });

    it('by filter: jobs retry --state cancelled, jobs cancel and jobs remove --state (queue.retryJobs, cancelJobs, removeJobs)', async () => {
      const q = db.queue('sweep');
      const jobs = await q.addBulk([0, 1, 2, 3].map((i) => ({ name: i < 3 ? 'news' : 'keep', payload: { i } })));
      const refused = await cli(url(), ['jobs', 'cancel', '--queue', 'sweep', '--state', 'waiting', '--name', 'news']);
      expect(refused.code).toBe(2);
      expect(refused.err).toContain('Cancel the waiting jobs of queue "sweep" named news?');
      const cancelled = await cli(url(), [
        'jobs',
        'cancel',
        '--queue',
        'sweep',
        '--state',
        'waiting',
        '--name',
        'news',
        '--yes',
        '--json',
      ]);
      expect(cancelled.json()).toEqual({ queue: 'sweep', cancelled: 3 });
      expect((await db.store.getJob(jobs[3].id))!.state).toBe('waiting');
      const retried = await cli(url(), [
        'jobs',
        'retry',
        '--queue',
        'sweep',
        '--state',
        'cancelled',
        '--older-than',
        '1d',
        '--json',
      ]);
      expect(retried.json()).toEqual({ queue: 'sweep', retried: 0 }); // none finished a day ago
      expect((await cli(url(), ['jobs', 'retry', '--queue', 'sweep', '--state', 'cancelled', '--json'])).json()).toEqual({
        queue: 'sweep',
        retried: 3,
      });
      const removed = await cli(url(), ['jobs', 'remove', '--queue', 'sweep', '--state', 'waiting,delayed', '--yes', '--json']);
      expect(removed.json()).toEqual({ queue: 'sweep', removed: 4 });
      expect((await cli(url(), ['jobs', 'remove', '--queue', 'sweep', '--yes'])).code).toBe(2); // a filter names its states
      expect((await cli(url(), ['jobs', 'cancel', '--queue', 'sweep', '--state', 'completed', '--yes'])).code).toBe(2);
    });

    it('clean, drain, obliterate, pause and resume', async () => {
      const q = db.queue('tidy');
      await q.addBulk([1, 2].map((i) => ({ name: 'n', payload: { i } })));
      await finish('tidy', 'completed');
      await q.addBulk([3, 4, 5].map((i) => ({ name: 'n', payload: { i } })));
      await q.add('n', {}, { delayMs: 3_600_000 });

      expect(
        (await cli(url(), ['clean', '--queue', 'tidy', '--state', 'completed', '--older-than', '1d', '--yes', '--json'])).json(),
      ).toMatchObject({ removed: 0 });
      const clean = await cli(url(), [
        'clean',
        '--queue',
        'tidy',
        '--state',
        'completed',
        '--older-than',
        '0s',
        '--limit',
        '1',
        '--yes',
      ]);
      expect(clean.out).toContain('Removed 1 completed job(s) of queue "tidy"');
      expect(
        (await cli(url(), ['clean', '--queue', 'tidy', '--state', 'completed', '--older-than', 'yesterday', '--yes'])).code,
      ).toBe(2);
      expect((await cli(url(), ['clean', '--queue', 'tidy', '--state', 'done', '--older-than', '1d', '--yes'])).code).toBe(2);

      expect((await cli(url(), ['pause', '--queue', 'tidy'])).code).toBe(0);
      expect(await q.isPaused()).toBe(true);
      expect((await cli(url(), ['resume', '--queue', 'tidy', '--json'])).json()).toEqual({ queue: 'tidy', paused: false });
      expect(await q.isPaused()).toBe(false);

      expect((await cli(url(), ['drain', '--queue', 'tidy'])).code).toBe(2); // no --yes
      expect((await cli(url(), ['drain', '--queue', 'tidy', '--yes', '--json'])).json()).toEqual({ queue: 'tidy', removed: 4 });
      await q.add('n', {});
      await db.store.claim('tidy', 1, 'test-worker', 30_000);
      const refused = await cli(url(), ['obliterate', '--queue', 'tidy', '--yes']);
      expect(refused.code).toBe(1);
      expect(refused.err).toMatch(/running|force/i);
      const forced = await cli(url(), ['obliterate', '--queue', 'tidy', '--force', '--yes', '--json']);
      expect(forced.json()).toEqual({ queue: 'tidy', removed: 2 });
      expect((await cli(url(), ['drain', '--queue', 'bad name!', '--yes'])).code).toBe(2);
    });
  });

  describe('doctor', () => {
    type Doc = {
      findings: { check: string; severity: string; message: string; fix: string; details?: Record<string, unknown> }[];
    };

    it('plants a paused queue with waiting jobs, a silent node, an old snapshot and a dropped partition: each reported, exit 1; fixed, exit 0', async () => {
      const holder = new Client({ connectionString: url(), application_name: 'cli-test-holder' });
      await holder.connect();
      try {
        // start from a clean bill (the earlier tests' queues are emptied)
        for (const name of ['mail', 'flaky']) await db.queue(name).obliterate({ force: true });
        const clean = await cli(url(), ['doctor', '--json']);
        expect(clean.json<Doc>().findings).toEqual([]);
        expect(clean.code).toBe(0);

        await db.queue('held').pause();
        await db.queue('held').add('n', {});
        await t.pool.query(
          `INSERT INTO pgqueue.nodes (id, host, pid, started_at, last_seen_at, heartbeat_ms, queues)
           VALUES ('gone-node', 'host-a', 4242, now() - interval '1 hour', now() - interval '10 minutes', 5000, '[]')`,
        );
        await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await holder.query('SELECT 1');
        const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        const { rows } = await t.pool.query<{ name: string }>(
          `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'pgqueue.job_history_done'::regclass AND c.relname <> 'job_history_done_default'
             AND pg_get_expr(c.relpartbound, c.oid) LIKE '%' || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD') || '%'
           ORDER BY c.relname LIMIT 1`,
        );
        const current = rows[0].name;
        await t.pool.query(`ALTER TABLE pgqueue.job_history_done DETACH PARTITION pgqueue.${current}`);
        await t.pool.query(`DROP TABLE pgqueue.${current}`);

        // The default limit (10 minutes) does not flag a snapshot just taken; a limit of 0 does.
        const lenient = (await cli(url(), ['doctor', '--json'])).json<Doc>();
        expect(lenient.findings.filter((f) => f.check === 'xmin-horizon')).toEqual([]);
        const r = await cli(url(), ['doctor', '--json', '--max-xmin-age', '0s']);
        expect(r.code).toBe(1);
        const f = r.json<Doc>().findings;
        expect(f).toEqual(
          expect.arrayContaining([
            expect.objectContaining({
              check: 'paused-queue',
              severity: 'warning',
              details: expect.objectContaining({ queue: 'held', waiting: 1 }),
            }),
            expect.objectContaining({
              check: 'silent-node',
              severity: 'warning',
              details: expect.objectContaining({ id: 'gone-node' }),
            }),
            expect.objectContaining({
              check: 'xmin-horizon',
              severity: 'error',
              details: expect.objectContaining({ pid }),
            }),
            expect.objectContaining({ check: 'partitions', severity: 'error' }),
          ]),
        );
        expect(f[0].severity).toBe('error'); // errors first
        for (const x of f) expect(x.fix.length).toBeGreaterThan(10);
        const human = await cli(url(), ['doctor', '--max-xmin-age', '0s']);
        expect(human.out).toMatch(/^ERROR {4}/m);
        expect(human.out).toContain(`pg_terminate_backend(${pid})`);
        expect(human.out).toMatch(/finding\(s\): \d+ error\(s\)/);

        // Fixed one by one: the errors gone, exit 0; --strict still fails on the warnings left.
        await holder.query('COMMIT');
        const fixed = await cli(url(), ['doctor', '--json', '--max-xmin-age', '0s', '--create-partitions']);
        expect(fixed.json<Doc & { createdPartitions: string[] }>().createdPartitions).toEqual([current]);
        expect(fixed.json<Doc>().findings.filter((x) => x.severity === 'error')).toEqual([]);
        expect(fixed.code).toBe(0);
        expect((await cli(url(), ['doctor', '--strict'])).code).toBe(1);
        await db.queue('held').resume();
        await t.pool.query(`DELETE FROM pgqueue.nodes WHERE id = 'gone-node'`);
        const after = (await cli(url(), ['doctor', '--json'])).json<Doc>().findings;
        expect(after.map((x) => x.check)).toEqual(['no-workers']); // resumed, with no node to run it
      } finally {
        await holder.end();
      }
    });

    it('reports pending migrations as an error', async () => {
      const r = await cli(url(), ['doctor', '--schema', 'nothing_here', '--json']);
      expect(r.code).toBe(1);
      expect(r.json<Doc>().findings).toEqual([expect.objectContaining({ check: 'migrations', severity: 'error' })]);
      await t.pool.query(`DELETE FROM printed.migrations WHERE version = (SELECT max(version) FROM printed.migrations)`);
      const behind = await cli(url(), ['doctor', '--schema', 'printed', '--json']);
      expect(behind.code).toBe(1);
      expect(behind.json<Doc>().findings[0]).toMatchObject({
        check: 'migrations',
        severity: 'error',
        message: expect.stringContaining('1 migration(s) pending'),
      });
    });
  });

  describe('the built bin, as a child process', () => {
    beforeAll(() => assertBuilt());

    it('runs status --json from dist/ without loading Nest, and exits with the codes it documents', async () => {
      const { stdout } = await execFileAsync(process.execPath, [BIN, 'status', '--json', '--url', url()]);
      expect(JSON.parse(stdout)).toMatchObject({ schema: 'pgqueue', queues: expect.any(Array) });
      const probe =
        `require(${JSON.stringify(path.join(path.dirname(BIN), 'main.js'))});` +
        `console.log(JSON.stringify(Object.keys(require.cache).filter((k) => k.includes('@nestjs') || k.includes('reflect-metadata'))))`;
      const loaded = await execFileAsync(process.execPath, ['-e', probe]);
      expect(JSON.parse(loaded.stdout)).toEqual([]);
      const bad = await execFileAsync(process.execPath, [BIN, 'status', '--nope'], {
        env: { ...process.env, DATABASE_URL: url() },
      }).catch((e: { code: number; stderr: string }) => e);
      expect(bad).toMatchObject({ code: 2, stderr: expect.stringContaining('Unknown flag --nope') });
    });
  });
});
