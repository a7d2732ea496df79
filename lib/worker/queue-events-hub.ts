import type { PgClientConfig } from '../core/pg-types';
import type { QueueEventKind } from '../core/queue-events';
import type { ConfirmRow } from '../db/events';
import { confirmHint, parseEventPayload, type ConfirmedEvent, type EventHint } from './event-confirm';

export type { EventHint } from './event-confirm';
import { Listener } from './listener';
import type { EngineLogger } from './logger';
import type { BackgroundService } from './service';

/** The read that confirms hints (EventStore.confirm). */
export interface EventReads {
  confirm(ids: readonly string[]): Promise<ConfirmRow[]>;
}

/** Who hears what the hub confirms: a subscription of one queue, or a waiter of some ids. */
export interface EventSink {
  /** True when this sink wants the event `h` names: hints no sink wants cost no read. */
  wants(h: EventHint): boolean;
  deliver(e: ConfirmedEvent): void;
  /** Events of this sink were dropped before they were read (the hub's backlog was full). */
  lagged(count: number, ids: readonly string[], since: Date, until: Date): void;
  /** The LISTEN connection is (again) up: what happened while it was down was not heard. */
  connected(): void;
  /** The hub stopped (the module shuts down): the sink ends. */
  closed(): void;
  /** True while the sink's buffer is half full: the hub lets its reader run before the next event. */
  backlogged?(): boolean;
}

/** Hints waiting for their read, at most; past this a burst is dropped and its sinks told (`lagged`). */
export const MAX_PENDING_HINTS = 20_000;
/** Ids per confirming read: one statement of two index lookups per id. */
const READ_BATCH = 5_000;
/** Events delivered between two turns of the event loop. */
const DELIVER_CHUNK = 200;

/** The hub's options. */
export interface EventsHubOptions {
  /** The direct connection to LISTEN on; null in poll-only mode (`listen: false`): nothing is heard. */
  readonly connection: PgClientConfig | null;
  /** The events channel (`<schema>_events`). */
  readonly channel: string;
  readonly reads: EventReads;
  readonly logger: EngineLogger;
  /** @default MAX_PENDING_HINTS */
  readonly maxPending?: number;
}

/**
 * The cross-process events of one database: its own LISTEN connection on the events channel,
 * opened at the first subscription (a process that subscribes to nothing opens nothing), and
 * one confirming read per burst. A notification is a hint: the hub reads the rows it names, live
 * and in history, in one statement, and fires only what the rows bear out (event-confirm.ts), so
 * a forged NOTIFY never reaches user code. Hints for queues and ids nobody listens to cost no
 * read. One read is in flight at a time; hints that arrive meanwhile wait for the next, and past
 * `maxPending` they are dropped and counted, and the sinks that wanted them get a `lagged`:
 * memory stays bounded under any burst.
 */
export class EventsHub implements BackgroundService {
  private readonly sinks = new Set<EventSink>();
  private listener: Listener | null = null;
  private pending = new Map<string, EventHint>();
  private reading: Promise<void> | null = null;
  private readonly maxPending: number;
  private closed = false;
  private readyWaiters: (() => void)[] = [];
  /** Hints dropped per sink since its last `lagged`. */
  private readonly drops = new Map<EventSink, { count: number; ids: string[]; since: Date; until: Date }>();

  constructor(private readonly opts: EventsHubOptions) {
    this.maxPending = opts.maxPending ?? MAX_PENDING_HINTS;
  }

  /** True while LISTEN is active (false in poll-only mode, before the first subscription, or while reconnecting). */
  get listening(): boolean {
    return this.listener?.connected ?? false;
  }

  /** True when this hub can ever hear events (not poll-only). */
  get canListen(): boolean {
    return this.opts.connection !== null;
  }

  /** Nothing to start: the connection opens at the first `add`. */
  start(): void {}

  /** One confirming read of what is pending now (tests). */
  async runOnce(): Promise<void> {
    await (this.reading ?? this.confirmPending());
  }

  /** Adds a sink; the first one opens the LISTEN connection. */
  add(sink: EventSink): void {
    if (this.closed) {
      sink.closed();
      return;
    }
    this.sinks.add(sink);
    if (!this.listener && this.opts.connection) {
      this.listener = new Listener({
        connection: this.opts.connection,
        channel: this.opts.channel,
        logger: this.opts.logger,
        onNotification: (payload) => this.hint(payload),
        onWake: () => undefined,
        onCancel: () => undefined,
        onPause: () => undefined,
        onConnected: () => {
          for (const w of this.readyWaiters.splice(0)) w();
          for (const s of this.sinks) s.connected();
        },
      });
      this.listener.start();
    }
  }

  /** Removes a sink (the connection stays open for the next; `stop` closes it). */
  remove(sink: EventSink): void {
    this.sinks.delete(sink);
    this.drops.delete(sink);
  }

  /**
   * Resolves once LISTEN is active, or after `maxWaitMs` (the connection may be down): a waiter
   * reads its job after this, so an outcome committed after the read is heard.
   */
  ready(maxWaitMs: number): Promise<boolean> {
    if (this.listening) return Promise.resolve(true);
    if (!this.listener) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve(this.listening);
      };
      const timer = setTimeout(() => {
        this.readyWaiters = this.readyWaiters.filter((w) => w !== done);
        resolve(false);
      }, maxWaitMs);
      timer.unref?.();
      this.readyWaiters.push(done);
    });
  }

  /** Closes the connection, and ends every sink (subscriptions close, waits reject). */
  async stop(): Promise<void> {
    this.closed = true;
    for (const w of this.readyWaiters.splice(0)) w();
    for (const s of [...this.sinks]) s.closed();
    this.sinks.clear();
    const l = this.listener;
    this.listener = null;
    await l?.stop();
    await this.reading;
    this.pending.clear();
  }

  /** The sinks that want `h`: the queue's subscriptions, and the waiters of its id. */
  private sinksFor(h: EventHint): EventSink[] {
    const out: EventSink[] = [];
    for (const s of this.sinks) if (s.wants(h)) out.push(s);
    return out;
  }

  private hint(payload: string): void {
    for (const h of parseEventPayload(payload)) {
      const sinks = this.sinksFor(h);
      if (sinks.length === 0) continue;
      const key = `${h.kind}|${h.id}|${h.attempt}`;
      if (this.pending.has(key)) continue;
      if (this.pending.size >= this.maxPending) {
        this.dropped(sinks, h.id);
        continue;
      }
      this.pending.set(key, h);
    }
    // The hints of one burst (one socket read) are batched: the read starts on the next turn.
    if (this.pending.size > 0 && !this.reading) {
      this.reading = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.confirmPending());
    }
  }

  private dropped(sinks: readonly EventSink[], id: string): void {
    const now = new Date();
    for (const s of sinks) {
      const d = this.drops.get(s);
      if (d) {
        d.count++;
        d.until = now;
        if (d.ids.length < 100) d.ids.push(id);
      } else this.drops.set(s, { count: 1, ids: [id], since: now, until: now });
    }
  }

  private async confirmPending(): Promise<void> {
    try {
      while (this.pending.size > 0 && !this.closed) {
        const batch: EventHint[] = [];
        for (const [key, h] of this.pending) {
          batch.push(h);
          this.pending.delete(key);
          if (batch.length >= READ_BATCH) break;
        }
        let rows: ConfirmRow[];
        try {
          rows = await this.opts.reads.confirm([...new Set(batch.map((h) => h.id))]);
        } catch (err) {
          // The read failed (the database is restarting, say): these hints cannot be confirmed;
          // their sinks are told they lagged rather than left to think nothing happened.
          this.opts.logger.warn(
            `pg-queue: reading ${batch.length} event(s) failed (${(err as Error).message}); reported as lagged`,
          );
          for (const h of batch) this.dropped(this.sinksFor(h), h.id);
          continue;
        }
        const byId = new Map<string, ConfirmRow[]>();
        for (const r of rows) {
          const id = String(r.id);
          const list = byId.get(id);
          if (list) list.push(r);
          else byId.set(id, [r]);
        }
        this.reportDrops();
        for (let i = 0; i < batch.length; i++) {
          // A turn of the event loop every DELIVER_CHUNK events, and before each event while an
          // iterator's buffer is half full: its consumer drains the buffer in between, where 5,000
          // events delivered in one go overflowed a buffer of 1,000 however fast it read
          // (bench/events-burst.cjs: 13,291 of 20,000 lagged). A consumer that stays behind is
          // still told it lagged; the others are not held up beyond those turns.
          if (i > 0 && (i % DELIVER_CHUNK === 0 || this.backlogged()))
            await new Promise<void>((resolve) => setImmediate(resolve));
          const h = batch[i];
          const e = confirmHint(h, byId.get(h.id) ?? []);
          if (e) for (const s of this.sinksFor(h)) s.deliver(e);
        }
      }
      this.reportDrops();
    } finally {
      this.reading = null;
    }
  }

  private backlogged(): boolean {
    for (const s of this.sinks) if (s.backlogged?.()) return true;
    return false;
  }

  private reportDrops(): void {
    for (const [sink, d] of this.drops) sink.lagged(d.count, d.ids, d.since, d.until);
    this.drops.clear();
  }
}

/** The terminal kinds a waiter listens for. */
export const FINAL_KINDS: ReadonlySet<QueueEventKind> = new Set(['completed', 'failed', 'cancelled', 'deadLettered']);
