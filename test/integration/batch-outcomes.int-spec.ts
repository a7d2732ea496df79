import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService } from '../../lib';
import { JobStore, type Outcome } from '../../lib/db/job-store';
import { bootApp } from '../support/app';
import { testPool, useTestDatabase } from '../support/database';

// A batch of completions is guarded per row on (id, attempt, locked_by) whether it carries one
// attempt for every job (the usual batch: the store then sends that attempt alone) or a mix of
// attempts (one per id, looked up by position): with history and without, prepared and not.

describe('batch completions: the attempt guard, one attempt or many', () => {
  const ctx = useTestDatabase();
  let app: INestApplicationContext;
  let queues: QueueService;

  beforeAll(async () => {
    // No worker claims queue 'direct': only the stores below do.
    app = await bootApp({ options: { connection: ctx.db.url, rescueIntervalMs: 60_000 }, queues: [{ name: 'direct' }] });
    await app.init();
    queues = app.get(QueueService);
  });

  afterAll(async () => {
    await app?.close();
  });

  const cases = [
    { history: true, prepared: true },
    { history: true, prepared: false },
    { history: false, prepared: true },
    { history: false, prepared: false },
  ];

  describe.each(cases)('history $history, prepared statements $prepared', ({ history, prepared }) => {
    async function withStore(
      fn: (store: JobStore, sql: (text: string, values?: unknown[]) => Promise<unknown[]>) => Promise<void>,
    ) {
      const pool = testPool(ctx.db.url, 2);
      try {
        const store = new JobStore(pool, {
          schema: 'pgqueue',
          retention: { completedMs: history ? 86_400_000 : 0, cancelledMs: 86_400_000, failedMs: null },
          asyncCommit: true,
          preparedStatements: prepared,
        });
        await fn(store, async (text, values) => (await pool.query(text, values)).rows);
      } finally {
        await pool.end();
      }
    }

    /** Claims `n` fresh jobs as `worker`; returns their ids and attempts, in id order. */
    async function claimFresh(store: JobStore, n: number, worker: string) {
      await queues.addBulk(
        'direct',
        Array.from({ length: n }, (_, i) => ({ name: `j${i}`, payload: { i } })),
      );
      const rows = await store.claim('direct', n, worker, 60_000);
      expect(rows).toHaveLength(n);
      return rows.map((r) => ({ id: String(r.id), attempt: r.attempt })).sort((a, b) => Number(a.id) - Number(b.id));
    }

    const completed = (id: string, attempt: number): Outcome => ({ kind: 'completed', id, attempt, resultJson: null });

    async function live(sql: (text: string, values?: unknown[]) => Promise<unknown[]>, ids: string[]) {
      const rows = (await sql('SELECT id::text FROM pgqueue.jobs WHERE id = ANY($1::bigint[]) ORDER BY id', [ids])) as {
        id: string;
      }[];
      return rows.map((r) => r.id);
    }

    it('one attempt for the whole batch: writes every row whose attempt matches, and no other', async () => {
      await withStore(async (store, sql) => {
        const jobs = await claimFresh(store, 5, 'w-one');
        // The third job's attempt moved on (as if rescued and claimed again by another worker).
        await sql('UPDATE pgqueue.jobs SET attempt = attempt + 1 WHERE id = $1', [jobs[2].id]);
        const batch = jobs.map((j) => completed(j.id, j.attempt));
        expect(new Set(jobs.map((j) => j.attempt)).size).toBe(1);
        const r = await store.settle(batch, 'w-one');
        expect(r.failures).toEqual([]);
        expect(batch.map((o) => r.written(o))).toEqual([true, true, false, true, true]);
        expect(
          await live(
            sql,
            jobs.map((j) => j.id),
          ),
        ).toEqual([jobs[2].id]);
        for (const j of [jobs[0], jobs[4]]) {
          const got = await queues.getJob(j.id);
          if (history) expect(got?.state).toBe('completed');
          else expect(got).toBeNull();
        }
      });
    });

    it('mixed attempts: each row is guarded by its own attempt', async () => {
      await withStore(async (store, sql) => {
        const jobs = await claimFresh(store, 4, 'w-mixed');
        // Jobs 1 and 3 are on a later attempt; job 2 is told a stale one.
        await sql('UPDATE pgqueue.jobs SET attempt = attempt + 2 WHERE id = ANY($1::bigint[])', [[jobs[1].id, jobs[3].id]]);
        const batch = [
          completed(jobs[0].id, jobs[0].attempt),
          completed(jobs[1].id, jobs[1].attempt + 2),
          completed(jobs[2].id, jobs[2].attempt + 1),
          completed(jobs[3].id, jobs[3].attempt + 2),
        ];
        const r = await store.settle(batch, 'w-mixed');
        expect(r.failures).toEqual([]);
        expect(batch.map((o) => r.written(o))).toEqual([true, true, false, true]);
        expect(
          await live(
            sql,
            jobs.map((j) => j.id),
          ),
        ).toEqual([jobs[2].id]);
        if (history) expect((await queues.getJob(jobs[3].id))?.attempt).toBe(jobs[3].attempt + 2);
      });
    });

    it('each job keeps its own result: none, JSON null, or a value', async () => {
      await withStore(async (store, sql) => {
        const jobs = await claimFresh(store, 4, 'w-results');
        const results = [null, 'null', '{"sum":42,"list":[1,"two"]}', '"text"'];
        const batch: Outcome[] = jobs.map((j, i) => ({
          kind: 'completed',
          id: j.id,
          attempt: j.attempt,
          resultJson: results[i],
        }));
        const r = await store.settle(batch, 'w-results');
        expect(batch.map((o) => r.written(o))).toEqual([true, true, true, true]);
        if (!history) return;
        const rows = (await sql(
          `SELECT id::text, result IS NULL AS sql_null, result FROM pgqueue.job_history WHERE id = ANY($1::bigint[]) ORDER BY id`,
          [jobs.map((j) => j.id)],
        )) as { id: string; sql_null: boolean; result: unknown }[];
        expect(rows).toEqual([
          { id: jobs[0].id, sql_null: true, result: null },
          { id: jobs[1].id, sql_null: false, result: null },
          { id: jobs[2].id, sql_null: false, result: { sum: 42, list: [1, 'two'] } },
          { id: jobs[3].id, sql_null: false, result: 'text' },
        ]);
      });
    });

    it("another worker's batch writes nothing", async () => {
      await withStore(async (store, sql) => {
        const jobs = await claimFresh(store, 3, 'w-owner');
        const batch = jobs.map((j) => completed(j.id, j.attempt));
        const r = await store.settle(batch, 'w-other');
        expect(batch.map((o) => r.written(o))).toEqual([false, false, false]);
        expect(
          await live(
            sql,
            jobs.map((j) => j.id),
          ),
        ).toEqual(jobs.map((j) => j.id));
      });
    });
  });
});
