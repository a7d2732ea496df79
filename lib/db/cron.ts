import type { NewJobRow } from './new-job';
import { DURABLE, type SchemaSql, type StoreContext } from './store-context';

/** Recurring jobs: a schedule's tick and its job, once across all nodes. */
export function cronStatements({ s, jobs }: SchemaSql) {
  // The cron tick is an enqueue on the queue's own connection: durable whatever the server default.
  return {
    /**
     * One tick of a recurring job: moves the schedule's last_tick forward and, only if it did,
     * inserts the tick's job (run_at = the tick) in the same statement. Another node with the
     * same tick, or an older one, inserts nothing. $1 key $2 tick $3 queue $4 name $5 payload
     * $6 max attempts $7 backoff $8 timeout ms $9 priority $10 channel
     */
    enqueueTick: `
      WITH moved AS (
        INSERT INTO ${s}.cron_schedules AS c (key, last_tick) VALUES ($1, $2)
        ON CONFLICT (key) DO UPDATE SET last_tick = EXCLUDED.last_tick WHERE c.last_tick < EXCLUDED.last_tick
        RETURNING key
      ), ins AS (
        INSERT INTO ${jobs} (queue, name, payload, run_at, max_attempts, backoff, timeout_ms, priority)
        SELECT $3, $4, $5::jsonb, $2, $6, $7::jsonb, $8, $9 FROM moved WHERE ${DURABLE}
        RETURNING id
      ), wake AS (SELECT pg_catalog.pg_notify($10, $3 || '|0') FROM ins)
      SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM wake)::int AS woken`,

    /** $1 key */
    lastTick: `SELECT last_tick FROM ${s}.cron_schedules WHERE key = $1`,
  };
}

/** The cron scheduler's writes and reads, on the queue's own pool. */
export class Cron {
  private readonly q: ReturnType<typeof cronStatements>;

  constructor(private readonly ctx: StoreContext) {
    this.q = cronStatements(ctx.sql);
  }

  /** Enqueues one tick of a schedule unless a node already did; true when this call did. */
  async enqueueTick(key: string, tick: Date, row: NewJobRow): Promise<boolean> {
    const [r] = await this.ctx.db.query<{ inserted: number }>(this.q.enqueueTick, [
      key,
      tick,
      row.queue,
      row.name,
      row.payloadJson,
      row.maxAttempts,
      row.backoff ? JSON.stringify(row.backoff) : null,
      row.timeoutMs,
      row.priority,
      this.ctx.channel,
    ]);
    return r.inserted > 0;
  }

  /** The last tick enqueued for a schedule, or null before its first. */
  async lastTick(key: string): Promise<Date | null> {
    const rows = await this.ctx.db.query<{ last_tick: Date }>(this.q.lastTick, [key]);
    return rows.length ? rows[0].last_tick : null;
  }
}
