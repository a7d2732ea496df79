import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { PgQueuePayloadError, QueueService, type Queue } from '../../lib';
import { MAX_JSON_DEPTH } from '../../lib/db/jsonb';
import { bootApp } from '../support/app';
import { useTestDatabase } from '../support/database';

// Issue 24, point 6: how deep a payload may be is a documented constant, the same in every run
// (a recursive check overflowed the stack at a depth that moved with the JIT), within what
// PostgreSQL's jsonb accepts, and the refusal says so briefly.

/** `levels` arrays and objects, alternating, around a string. */
function nested(levels: number): unknown {
  let v: unknown = 'core';
  for (let i = 0; i < levels; i++) v = i % 2 ? { k: v } : [v];
  return v;
}

describe('payload depth', () => {
  const t = useTestDatabase();
  let app: INestApplicationContext;
  let queue: Queue;

  beforeAll(async () => {
    app = await bootApp({ options: { connection: t.db.url, workers: false }, queues: [{ name: 'deep' }] });
    queue = app.get(QueueService).getQueue('deep');
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`stores a payload ${MAX_JSON_DEPTH} levels deep as passed, alone and in a bulk`, async () => {
    const payload = nested(MAX_JSON_DEPTH);
    const one = await queue.add('x', payload);
    expect((await queue.getJob(one.id))?.payload).toEqual(payload);
    // addBulk sends its payloads inside one more JSON array: one level more for PostgreSQL.
    const [a, b] = await queue.addBulk([
      { name: 'x', payload },
      { name: 'x', payload: nested(MAX_JSON_DEPTH - 1) },
    ]);
    expect((await queue.getJob(a.id))?.payload).toEqual(payload);
    expect((await queue.getJob(b.id))?.payload).toEqual(nested(MAX_JSON_DEPTH - 1));
  });

  it.each([MAX_JSON_DEPTH + 1, 100_000])('refuses %i levels before storing anything, with a short message', async (levels) => {
    const before = await t.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pgqueue.jobs');
    const err = await queue.add('x', nested(levels)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgQueuePayloadError);
    const message = (err as Error).message;
    expect(message).toMatch(
      new RegExp(
        `^Payload of job "x" in queue "deep" cannot be stored as JSON: payload.*….* is nested deeper than ${MAX_JSON_DEPTH} levels`,
      ),
    );
    expect(message.length).toBeLessThan(450);
    await expect(queue.addBulk([{ name: 'x', payload: nested(levels) }])).rejects.toThrow(PgQueuePayloadError);
    const after = await t.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pgqueue.jobs');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });
});
