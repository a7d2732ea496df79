import { waitFor } from './database';

/** What the helper needs of a pg Pool or Client. */
interface Queryable {
  query(text: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/**
 * Resolves once a rescue pass has run that started after this call: a canary job with an
 * expired lease (in a queue no worker serves) is inserted, and waited for until a rescuer has
 * put it back to waiting; then it is deleted. The proof a test needs before it says "the rescuer
 * left this job alone": a pass that would have taken it, had its lease expired, has happened.
 */
export async function afterRescuePass(db: Queryable, { schema = 'pgqueue', timeoutMs = 10_000 } = {}): Promise<void> {
  const { rows } = await db.query(
    `INSERT INTO ${schema}.jobs (queue, name, payload, state, attempt, max_attempts, locked_by, locked_until)
     VALUES ('test-rescue-canary', 'canary', '{}', 'active', 1, 2, 'canary', now() - interval '1 millisecond') RETURNING id`,
  );
  const id = String(rows[0].id);
  await waitFor(
    async () => (await db.query(`SELECT state FROM ${schema}.jobs WHERE id = $1`, [id])).rows[0]?.state === 'waiting',
    {
      timeoutMs,
      message: 'a rescue pass to return the canary job to the queue',
    },
  );
  await db.query(`DELETE FROM ${schema}.jobs WHERE id = $1`, [id]);
}
