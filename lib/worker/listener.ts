import { Client } from 'pg';
import type { PgClientConfig } from '../core/pg-types';
import { listenSql } from '../db/listen';
import type { EngineLogger } from './logger';
import type { BackgroundService } from './service';

export interface ListenerOptions {
  readonly connection: PgClientConfig;
  readonly channel: string;
  /** Called for each notification: the queue, and how many ms until its earliest new job is due. */
  readonly onWake: (queue: string, dueInMs: number) => void;
  /**
   * `queue.cancel(id)` was called for a running job (possibly one this process runs). A hint
   * only: any role that can connect may send it; confirm in the database before acting.
   */
  readonly onCancel: (id: string) => void;
  /** A queue was paused: workers hand back the jobs they prefetched. A hint only, like `onCancel`. */
  readonly onPause: (queue: string) => void;
  /** '!limits|queue': the queue's stored global concurrency changed (a hint, to confirm by a read). */
  readonly onLimits?: (queue: string) => void;
  /**
   * Every payload, instead of the wake-up parsing above (onWake, onCancel and onPause are then
   * not called): the events hub's connection on the events channel (queue-events-hub.ts).
   */
  readonly onNotification?: (payload: string) => void;
  /** Called after every (re)connection, so workers poll once to catch what was missed meanwhile. */
  readonly onConnected: () => void;
  readonly logger: EngineLogger;
  /** First reconnect delay; doubles up to `maxBackoffMs`, with jitter (see `reconnectDelayMs`). */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

/** The reconnect the listener has scheduled: the how-manieth after the drop, and its delay. */
export interface ScheduledReconnect {
  readonly attempt: number;
  readonly delayMs: number;
}

/**
 * The delay before reconnect `attempt` (1 for the first after a drop): doubling from `minMs`,
 * never above `maxMs` (docs/reliability.md promises reconnects at most 5 s apart), spread over the upper
 * half [d/2, d] so that many processes that lost the server together do not return together.
 */
export function reconnectDelayMs(attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(Math.max(attempt - 1, 0), 20));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * The doorbell: one dedicated connection per process LISTENs on the schema's channel. It
 * reconnects with exponential backoff and jitter after any drop (a server restart, a terminated
 * backend, a network blip). While it is down, workers still progress by polling.
 */
export class Listener implements BackgroundService {
  private client: Client | null = null;
  private stopped = true;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private pendingReconnect: ScheduledReconnect | null = null;
  private connectedAt: number | null = null;
  private disconnectedAt: number | null = Date.now();

  constructor(private readonly opts: ListenerOptions) {}

  /** True while LISTEN is active. */
  get connected(): boolean {
    return this.connectedAt !== null;
  }

  /** When the connection was lost (or first wanted), or null while connected. */
  get disconnectedSince(): number | null {
    return this.disconnectedAt;
  }

  /** The reconnect waiting to run, or null (connected, connecting, or stopped). */
  get scheduledReconnect(): ScheduledReconnect | null {
    return this.pendingReconnect;
  }

  /** Connects in the background: if it cannot, polling carries the load meanwhile. */
  start(): void {
    this.stopped = false;
    void this.connect();
  }

  /**
   * One connection attempt now, unless connected or stopped (a reconnect waiting is brought
   * forward); resolves once LISTEN runs or the attempt failed. For tests.
   */
  runOnce(): Promise<void> {
    if (this.stopped || this.client) return Promise.resolve();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.pendingReconnect = null;
    return this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new Client(this.opts.connection);
    this.client = client;
    let settled = false;
    const lost = (err?: Error) => {
      if (settled) return;
      settled = true;
      if (this.client === client) this.client = null;
      this.connectedAt = null;
      this.disconnectedAt ??= Date.now();
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      if (!this.stopped) {
        this.opts.logger.warn(`LISTEN connection lost (${err?.message ?? 'closed'}); reconnecting, polling meanwhile`);
        this.scheduleReconnect();
      }
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (n) => {
      if (!n.payload) return;
      if (this.opts.onNotification) return this.opts.onNotification(n.payload);
      // Control messages start with '!', which no queue name may: '!cancel|<id>', '!pause|<queue>', '!limits|<queue>'.
      if (n.payload.startsWith('!cancel|')) return this.opts.onCancel(n.payload.slice(8));
      if (n.payload.startsWith('!pause|')) return this.opts.onPause(n.payload.slice(7));
      if (n.payload.startsWith('!limits|')) return this.opts.onLimits?.(n.payload.slice(8));
      if (n.payload.startsWith('!')) return;
      const bar = n.payload.lastIndexOf('|');
      const queue = bar < 0 ? n.payload : n.payload.slice(0, bar);
      const due = bar < 0 ? 0 : Number(n.payload.slice(bar + 1));
      this.opts.onWake(queue, Number.isFinite(due) ? due : 0);
    });
    try {
      await client.connect();
      await client.query(listenSql(this.opts.channel));
      if (this.stopped || settled) {
        lost();
        return;
      }
      this.failures = 0;
      this.connectedAt = Date.now();
      this.disconnectedAt = null;
      this.opts.onConnected();
    } catch (err) {
      lost(err as Error);
    }
  }

  private scheduleReconnect(): void {
    const delay = reconnectDelayMs(++this.failures, this.opts.minBackoffMs ?? 100, this.opts.maxBackoffMs ?? 5_000);
    this.pendingReconnect = { attempt: this.failures, delayMs: delay };
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.pendingReconnect = null;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.pendingReconnect = null;
    const c = this.client;
    this.client = null;
    this.connectedAt = null;
    if (c) {
      c.removeAllListeners('notification');
      await c.end().catch(() => undefined);
    }
  }
}
